"""Per-image statistics in every condition record, the bootstrap intervals, worst cases
and the paired comparison of models, on real sweeps of the demo segmentation model (the
detection sweep is checked in test_robustness_sweep.py)."""
import csv
import hashlib
import json
import os
import os.path as osp
import shutil

import numpy as np
import pytest

import reobench_mm  # noqa: F401
from helpers import SEG_DEMO_CONFIG
from reobench_corruptions.condition import Condition
from reobench_mm.analysis.compare import compare_models, write_cross_model
from reobench_mm.analysis.results_file import read_results
from reobench_mm.errors import SweepError
from reobench_mm.evaluation.functional.bootstrap import resample_counts
from reobench_mm.evaluation.functional.condition_stats import ImageStats
from reobench_mm.robustness.options import RobustnessOptions
from reobench_mm.robustness.store import LEGACY_CONDITION_FORMAT, seal_record
from reobench_mm.robustness.sweep import run_sweep
from sweep_helpers import sweep_options, untrained_checkpoint

# the module's tests share one fixture: one worker runs them all (--dist loadgroup)
pytestmark = pytest.mark.xdist_group('uncertainty_sweeps')

CORRUPTIONS = ['gaussian_noise', 'cloud']
SEVERITIES = [1, 3]


def _sweep(checkpoint, data_root, work_dir, **options):
    return run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=CORRUPTIONS,
                     severities=SEVERITIES, work_dir=work_dir,
                     cfg_options=sweep_options(data_root)[0], calibration=True, **options)


@pytest.fixture(scope='session')  # with the xdist group: built once per run
def sweeps(demo_data, tmp_path_factory, seg_model):
    """Sweeps of two models (trained briefly, untrained) on the same 3 test images."""
    root = str(tmp_path_factory.mktemp('uncertainty'))
    data_root = osp.join(demo_data, 'potsdam')
    trained = seg_model.checkpoint
    untrained = untrained_checkpoint(SEG_DEMO_CONFIG, f'{root}/untrained.pth')
    outcomes = {}
    for name, checkpoint in (('trained', trained), ('untrained', untrained)):
        outcomes[name] = _sweep(checkpoint, data_root, f'{root}/{name}')
    return dict(root=root, data_root=data_root, trained=trained, untrained=untrained,
                outcomes=outcomes)


def _records(work_dir):
    folder = osp.join(work_dir, 'conditions')
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith('.json'):
            with open(osp.join(folder, name)) as handle:
                out[name] = json.load(handle)
    return out


def _stats(work_dir, record):
    with open(osp.join(work_dir, 'conditions', record['images']['file']), 'rb') as handle:
        data = handle.read()
    assert hashlib.sha256(data).hexdigest() == record['images']['sha256']
    assert len(data) == record['images']['bytes']
    return ImageStats.from_bytes(data)


@pytest.mark.slow
def test_every_record_keeps_statistics_that_give_its_numbers(sweeps):
    work_dir = sweeps['outcomes']['trained'].work_dir
    records = _records(work_dir)
    assert len(records) == 1 + len(CORRUPTIONS) * len(SEVERITIES)
    for record in records.values():
        assert record['format'] == 'reobench_mm.sweep_condition/2'
        stats = _stats(work_dir, record)
        assert stats.num_images == record['images']['num_images'] == 3
        assert all(i.endswith('.png') for i in stats.image_ids)
        # the dataset metric recomputed from all images equals the recorded one
        assert abs(stats.task.recorded_value() - record['result']['value']) <= 1e-9
        assert abs(stats.task.values()[0] - record['result']['value']) < 0.005 + 1e-9
        ece = stats.calibration['calib'].values()['ECE'][0]
        assert abs(ece - record['metrics']['calib/ECE']) <= 1e-9
        for name in ('NLL', 'Brier', 'gap'):
            assert stats.calibration['calib'].values()[name][0] == pytest.approx(
                record['metrics'][f'calib/{name}'], abs=1e-9)
        per_class = stats.task.class_iou()[0]
        recorded = [record['result']['per_class'][c] for c in record['result']['per_class']]
        assert np.allclose(per_class, np.array(recorded, dtype=float), atol=1e-4,
                           equal_nan=True)


@pytest.mark.slow
def test_intervals_in_every_output(sweeps):
    outcome = sweeps['outcomes']['trained']
    work_dir = outcome.work_dir
    results = read_results(osp.join(work_dir, 'results.json'))
    intervals = results.summary.intervals
    assert intervals['available'] and intervals['level'] == 0.95
    assert intervals['resamples'] == 1000 and intervals['images'] == 3
    summary = results.summary
    # the clean and ΔTP intervals, recomputed here from the files and the documented draws
    stats = {Condition.from_key(k): ImageStats.from_bytes(
        open(osp.join(work_dir, v['file']), 'rb').read())
        for k, v in json.load(open(osp.join(work_dir, 'results.json')))['image_stats'].items()}
    weights = resample_counts(3, 1000, 0)
    values = {c: s.task.values(weights) for c, s in stats.items()}
    clean = values[Condition()]
    assert intervals['clean'] == pytest.approx(list(np.percentile(clean, [2.5, 97.5])))
    means = [np.mean([values[Condition(n, s)] for s in SEVERITIES], axis=0)
             for n in CORRUPTIONS]
    delta = clean - np.mean(means, axis=0)
    assert intervals['delta_tp'] == pytest.approx(list(np.percentile(delta, [2.5, 97.5])))
    assert intervals['per_corruption']['cloud']['severities']['3'] == pytest.approx(
        list(np.percentile(values[Condition('cloud', 3)], [2.5, 97.5])))
    for name in ('avg', 'mpc', 'rpc'):
        low, high = intervals[name]
        assert low <= high
    assert set(intervals['extra']) >= {'calib/ECE', 'calib/NLL', 'calib/Brier', 'calib/gap'}
    # results.csv, report.md, logger keys, plots
    with open(osp.join(work_dir, 'results.csv')) as handle:
        rows = list(csv.DictReader(handle))
    assert float(rows[0]['mIoU_ci_low']) == pytest.approx(intervals['clean'][0])
    assert float(rows[0]['mIoU_ci_high']) == pytest.approx(intervals['clean'][1])
    report = open(osp.join(work_dir, 'report.md')).read()
    assert '## Uncertainty (95 % intervals)' in report
    assert "do not include the corruptions' own randomness" in report
    for key in ('clean', 'avg', 'delta_tp', 'mpc', 'rpc'):
        assert outcome.metrics[f'robust/{key}_ci_low'] == pytest.approx(intervals[key][0])
        assert outcome.metrics[f'robust/{key}_ci_high'] == pytest.approx(intervals[key][1])
    assert summary.clean == outcome.metrics['robust/clean']


@pytest.mark.slow
def test_interval_options_rewrite_only_the_report(sweeps, tmp_path):
    work_dir = str(tmp_path / 'copy')
    shutil.copytree(sweeps['outcomes']['trained'].work_dir, work_dir)
    outcome = _sweep(sweeps['trained'], sweeps['data_root'], work_dir, bootstrap=200,
                     interval_level=0.9, bootstrap_seed=5)
    assert outcome.evaluated == [] and len(outcome.skipped) == 5
    intervals = read_results(osp.join(work_dir, 'results.json')).summary.intervals
    assert (intervals['resamples'], intervals['level'], intervals['seed']) == (200, 0.9, 5)
    assert '## Uncertainty (90 % intervals)' in open(osp.join(work_dir, 'report.md')).read()
    _sweep(sweeps['trained'], sweeps['data_root'], work_dir, bootstrap=0)
    intervals = read_results(osp.join(work_dir, 'results.json')).summary.intervals
    assert intervals == {'available': False,
                         'reason': 'intervals were turned off (0 bootstrap resamples)'}
    assert 'No intervals: intervals were turned off' in open(
        osp.join(work_dir, 'report.md')).read()


@pytest.mark.parametrize('options,message', [
    (dict(bootstrap=-1), 'bootstrap resamples must be an integer >= 0'),
    (dict(bootstrap=True), 'bootstrap resamples must be an integer >= 0'),
    (dict(interval_level=1.5), r'interval level must be a number in \(0, 1\)'),
    (dict(interval_level='95%'), r'interval level must be a number in \(0, 1\)'),
    (dict(bootstrap_seed=-2), 'bootstrap_seed must be an integer >= 0'),
    (dict(bootstap=10), "did you mean 'bootstrap'"),
])
def test_bad_interval_options_are_refused(options, message):
    with pytest.raises(SweepError, match=message):
        RobustnessOptions.create(options)


@pytest.mark.slow
def test_records_without_statistics_are_read_and_say_so(sweeps, tmp_path):
    work_dir = str(tmp_path / 'legacy')
    shutil.copytree(sweeps['outcomes']['trained'].work_dir, work_dir)
    folder = osp.join(work_dir, 'conditions')
    for name, record in _records(work_dir).items():
        os.remove(osp.join(folder, record['images']['file']))
        record = {k: v for k, v in record.items() if k not in ('images', 'digest')}
        record['format'] = LEGACY_CONDITION_FORMAT
        with open(osp.join(folder, name), 'w') as handle:
            json.dump(seal_record(record), handle)
    outcome = _sweep(sweeps['trained'], sweeps['data_root'], work_dir)
    assert outcome.evaluated == [] and outcome.reevaluated == {}
    results = read_results(osp.join(work_dir, 'results.json'))
    intervals = results.summary.intervals
    assert intervals['available'] is False
    assert 'have no per-image statistics' in intervals['reason']
    assert results.image_stats() is None
    report = open(osp.join(work_dir, 'report.md')).read()
    assert 'No intervals: 5 of 5 condition records have no per-image statistics' in report
    assert '## Worst cases' not in report and '## Uncertainty' in report
    # a new-format record that lost its statistics entry is not mistaken for an old one
    name, record = next(iter(_records(work_dir).items()))
    record = {k: v for k, v in record.items() if k != 'digest'}
    record['format'] = 'reobench_mm.sweep_condition/2'
    with open(osp.join(folder, name), 'w') as handle:
        json.dump(seal_record(record), handle)
    outcome = _sweep(sweeps['trained'], sweeps['data_root'], work_dir)
    assert [c.tag for c in outcome.evaluated] == [name[:-5]]
    assert 'no "images" entry' in next(iter(outcome.reevaluated.values()))


@pytest.mark.slow
def test_an_altered_statistics_file_is_evaluated_again(sweeps, tmp_path):
    work_dir = str(tmp_path / 'altered')
    shutil.copytree(sweeps['outcomes']['trained'].work_dir, work_dir)
    path = osp.join(work_dir, 'conditions', 'cloud_s3.images.npz')
    with open(path, 'r+b') as handle:
        handle.seek(40)
        byte = handle.read(1)
        handle.seek(40)
        handle.write(bytes([byte[0] ^ 0xFF]))
    outcome = _sweep(sweeps['trained'], sweeps['data_root'], work_dir)
    assert [c.key for c in outcome.evaluated] == ['cloud@3']
    assert 'SHA-256 differs' in outcome.reevaluated['cloud@3']
    assert read_results(osp.join(work_dir, 'results.json')).summary.intervals['available']


@pytest.mark.slow
def test_worst_cases_from_the_statistics(sweeps):
    work_dir = sweeps['outcomes']['trained'].work_dir
    with open(osp.join(work_dir, 'worst_cases.json')) as handle:
        cases = json.load(handle)
    assert cases['images'] == 3 and len(cases['per_image']) == 3
    results = read_results(osp.join(work_dir, 'results.json'))
    stats = results.image_stats()
    clean = stats[Condition()].task.per_image_values()
    for key, items in cases['largest_drops'].items():
        values = stats[Condition.from_key(key)].task.per_image_values()
        drops = clean - values
        assert [d['index'] for d in items] == list(np.argsort(-drops, kind='stable'))
        assert items[0]['drop'] == pytest.approx(drops.max())
    for severity, block in cases['per_severity'].items():
        table = np.stack([stats[Condition(n, int(severity))].task.per_image_values()
                          for n in block['corruptions']])
        assert block['worst_case_mean'] == pytest.approx(table.min(axis=0).mean())
        worst = block['worst_images'][0]
        assert worst['value'] == pytest.approx(table.min())
    report = open(osp.join(work_dir, 'report.md')).read()
    assert '## Worst cases' in report and '![worst cases](worst_cases.png)' in report
    assert osp.getsize(osp.join(work_dir, 'worst_cases.png')) > 10000
    with open(osp.join(work_dir, 'worst_cases.csv')) as handle:
        assert len(list(csv.reader(handle))) == 4


@pytest.mark.slow
def test_paired_comparison_of_two_models(sweeps, tmp_path):
    paths = [osp.join(sweeps['outcomes'][n].work_dir, 'results.json')
             for n in ('trained', 'untrained')]
    comparison = compare_models(paths, names=['trained', 'untrained'], n_bootstrap=300,
                                permutations=999)
    paired = comparison.paired
    assert paired is not None and paired.reference == 'trained' and paired.exact
    versus = paired.versus['untrained']
    summaries = [read_results(p).summary for p in paths]
    assert versus.difference['clean'] == pytest.approx(
        versus.values_a['clean'] - versus.values_b['clean'])
    assert versus.values_b['clean'] == pytest.approx(summaries[0].clean, abs=0.005)
    assert versus.values_a['clean'] == pytest.approx(summaries[1].clean, abs=0.005)
    # 3 images: 8 swaps, the smallest two-sided p-value is 2/8
    assert min(p['two-sided'] for p in versus.p_value.values()) >= 0.25 - 1e-12
    files = write_cross_model(comparison, str(tmp_path / 'cross'), plots=False)
    assert {'paired_differences.csv', 'rank_flips.csv'} <= set(files)
    markdown = open(files['cross_model.md']).read()
    assert '## Paired differences against trained' in markdown
    data = json.load(open(files['cross_model.json']))
    assert data['paired']['versus_reference']['untrained']['clean']['p_value'] >= 0.25
    # other images are refused, naming the difference
    other = str(tmp_path / 'other')
    shutil.copytree(sweeps['outcomes']['untrained'].work_dir, other)
    document = json.load(open(osp.join(other, 'results.json')))
    entry = document['image_stats']['clean']
    stats = ImageStats.from_bytes(open(osp.join(other, entry['file']), 'rb').read())
    stats.image_ids = ('renamed.png', ) + stats.image_ids[1:]
    data = stats.to_bytes()
    with open(osp.join(other, entry['file']), 'wb') as handle:
        handle.write(data)
    entry['sha256'] = hashlib.sha256(data).hexdigest()
    with open(osp.join(other, 'results.json'), 'w') as handle:
        json.dump(document, handle)
    with pytest.raises(ValueError, match=r"evaluated on other images.*renamed\.png"):
        compare_models([paths[0], osp.join(other, 'results.json')], n_bootstrap=50)


@pytest.mark.slow
def test_a_failing_thumbnail_leaves_the_report(sweeps, tmp_path, monkeypatch):
    from reobench_mm.robustness import worst_case_images

    def broken(*args, **kwargs):
        raise RuntimeError('no display')

    monkeypatch.setattr(worst_case_images, 'worst_case_panels', broken)
    work_dir = str(tmp_path / 'thumbnails')
    shutil.copytree(sweeps['outcomes']['trained'].work_dir, work_dir)
    os.remove(osp.join(work_dir, 'worst_cases.png'))
    outcome = _sweep(sweeps['trained'], sweeps['data_root'], work_dir, bootstrap=100)
    assert outcome.evaluated == []
    report = open(osp.join(work_dir, 'report.md')).read()
    assert '## Worst cases' in report and 'worst_cases.png' not in report
    assert not osp.exists(osp.join(work_dir, 'worst_cases.png'))
