"""The random corruptions evaluated with several corruption seeds: the conditions a run
plans, the cells as means over the seeds, the intervals resampling images and seeds
(against a direct numpy computation from the statistics files), resuming, shards, the
tool's flag and the paired comparison."""
import json
import math
import os.path as osp
import shutil

import numpy as np
import pytest

import reobench_mm  # noqa: F401
from helpers import SEG_DEMO_CONFIG, call_tool_command, run_tools_together
from reobench_corruptions import get_corruption
from reobench_corruptions.condition import Condition
from reobench_mm.analysis.compare import compare_models
from reobench_mm.analysis.corruption_seeds import fold_seeds, mean_result
from reobench_mm.analysis.intervals import summary_intervals
from reobench_mm.analysis.results import ConditionResult, aggregate
from reobench_mm.analysis.results_file import read_results
from reobench_mm.errors import SweepError
from reobench_mm.evaluation.functional.bootstrap import resample_counts, resample_draws
from reobench_mm.evaluation.functional.condition_stats import ImageStats
from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats
from reobench_mm.evaluation.functional.seed_average import SeedAverage, average_over_seeds
from reobench_mm.robustness.options import RobustnessOptions
from reobench_mm.robustness.shards import merge_sweeps
from reobench_mm.robustness.sweep import run_sweep
from sweep_helpers import sweep_options, untrained_checkpoint

CORRUPTIONS = ['gaussian_noise', 'haze']
SEVERITIES = [1, 3]
SEEDS = 3


# ----------------------------------------------------------------------------- the plan
def test_only_random_corruptions_get_further_seeds():
    options = RobustnessOptions.create(dict(corruptions=['cloud', 'haze', 'translate'],
                                            severities=[2, 4], seed=5, corruption_seeds=3))
    plan = options.plan
    assert plan.random_corruptions == ('cloud', 'translate')
    assert plan.seeds == (5, 6, 7)
    extra = plan.seed_conditions
    assert [c.tag for c in extra] == [
        'cloud_s2_seed6', 'cloud_s2_seed7', 'cloud_s4_seed6', 'cloud_s4_seed7',
        'translate_s2_seed6', 'translate_s2_seed7', 'translate_s4_seed6',
        'translate_s4_seed7']
    assert all(get_corruption(c.corruption).stochastic for c in extra)
    assert plan.all_conditions[:7] == [c for c in plan.all_conditions if c.seed == 5]
    assert len(plan.all_conditions) == 1 + 3 * 2 + len(extra)
    assert len({c.tag for c in plan.all_conditions}) == len(plan.all_conditions)
    # one seed: the plan of before
    assert RobustnessOptions.create(dict(corruptions=['cloud'])).plan.seed_conditions == []


@pytest.mark.parametrize('value', [0, -1, 1.5, True, '3', 101])
def test_a_bad_seed_count_is_refused(value):
    with pytest.raises(SweepError, match=r'corruption_seeds must be an integer in 1\.\.100'):
        RobustnessOptions.create(dict(corruption_seeds=value))


def test_the_seed_count_is_a_flag_of_the_tools():
    import argparse

    from reobench_mm.robustness.options import add_option_arguments, options_from_args
    parser = argparse.ArgumentParser()
    add_option_arguments(parser)
    values = options_from_args(parser.parse_args(['--corruption-seeds', '4']))
    assert values == {'corruption_seeds': 4}
    assert 'corruption seeds' in parser.format_help()


# ----------------------------------------------------------------------------- folding
def _result(value, shift=0.0):
    return ConditionResult(value, {'a': value + shift, 'b': value - shift},
                           {'aAcc': value / 2, 'calib/ECE': value / 100})


def test_cells_are_the_means_over_the_seeds():
    first = {Condition(): _result(80.0), Condition('cloud', 1): _result(70.0, 1.0),
             Condition('haze', 1): _result(60.0)}
    further = {Condition('cloud', 1, seed=1): _result(66.0, 2.0),
               Condition('cloud', 1, seed=2): _result(71.0, 4.0)}
    folded, block = fold_seeds(first, further, seed=0)
    cell = folded[Condition('cloud', 1)]
    values = np.array([70.0, 66.0, 71.0])
    assert cell.value == pytest.approx(values.mean(), abs=1e-12)
    assert cell.per_class['a'] == pytest.approx((71 + 68 + 75) / 3, abs=1e-12)
    assert cell.extra['calib/ECE'] == pytest.approx(values.mean() / 100, abs=1e-15)
    assert folded[Condition('haze', 1)] == first[Condition('haze', 1)]
    assert block['seeds'] == [0, 1, 2] and block['corruptions'] == ['cloud']
    entry = block['conditions']['cloud@1']
    assert entry['seeds'] == {'0': 70.0, '1': 66.0, '2': 71.0}
    assert entry['sd'] == pytest.approx(np.std(values, ddof=1), abs=1e-12)
    assert entry['range'] == 5.0
    summary = aggregate(folded)
    assert summary.per_corruption['cloud'] == pytest.approx(values.mean(), abs=1e-12)
    assert summary.avg == pytest.approx((values.mean() + 60.0) / 2, abs=1e-12)
    # nothing further: unchanged, no block
    assert fold_seeds(first, {}, seed=0) == (first, None)
    assert mean_result([first[Condition()]]) is first[Condition()]


@pytest.mark.parametrize('further,message', [
    ({Condition('gaussian_noise', 1, seed=1): 1.0}, 'none of its first seed'),
    ({Condition('cloud', 1, seed=0): 1.0}, 'repeat the first seed 0'),
    ({Condition(seed=1): 1.0}, 'clean condition has no corruption draws'),
    ({('cloud', 1): 1.0}, 'keyed by their Condition'),
    ({Condition('cloud', 1, seed=1): 1.0, Condition('cloud', 2, seed=2): 1.0},
     'severities were evaluated with other corruption seeds'),
])
def test_inconsistent_further_seeds_are_refused(further, message):
    first = {Condition(): 80.0, Condition('cloud', 1): 70.0, Condition('cloud', 2): 60.0}
    with pytest.raises((ValueError, TypeError), match=message):
        fold_seeds(first, further, seed=0)


# ----------------------------------------------------------------------------- seed average
def _interval(replicates):
    """The 95 % percentile interval, as numpy computes it."""
    return [float(v) for v in np.percentile(replicates[np.isfinite(replicates)], [2.5, 97.5])]


def _seg_stats(rng, images=12, classes=3, scale=1.0):
    label = rng.integers(50, 400, size=(images, classes))
    pred = rng.integers(50, 400, size=(images, classes))
    inter = np.minimum(label, pred) * rng.uniform(0.2, scale, size=(images, classes))
    areas = np.stack([inter.astype(np.int64), pred, label], axis=-1)
    return SegmentationImageStats(areas)


def test_seed_average_is_the_mean_or_the_drawn_mean():
    rng = np.random.default_rng(3)
    members = [_seg_stats(rng, scale=s) for s in (0.4, 0.7, 1.0)]
    weights = resample_counts(12, 50, 1)
    per_seed = np.stack([m.values(weights) for m in members], axis=1)  # (B, S)
    np.testing.assert_allclose(SeedAverage(members).values(weights), per_seed.mean(1),
                               rtol=0, atol=1e-12)
    draws = resample_draws(3, 50, 1)
    expected = [per_seed[b, draws[b]].mean() for b in range(50)]
    np.testing.assert_allclose(SeedAverage(members, draws).values(weights), expected,
                               rtol=0, atol=1e-12)
    joined = SeedAverage(members).concat(SeedAverage(members))
    assert joined.num_images == 24
    np.testing.assert_allclose(joined.values(), SeedAverage(members).values(), atol=1e-12)
    with pytest.raises(ValueError, match=r'draws must be \(resamples, 3\)'):
        SeedAverage(members, np.zeros((5, 2), dtype=np.int64))
    with pytest.raises(ValueError, match='50 image resamples but seed draws for 4'):
        SeedAverage(members, draws[:4]).values(weights)
    ids = tuple(f'{i}.png' for i in range(12))
    other = ImageStats(ids[::-1], members[1])
    with pytest.raises(ValueError, match='other images'):
        average_over_seeds([ImageStats(ids, members[0]), other])


def test_seed_draws_are_seeded_and_independent_of_the_image_draws():
    a, b = resample_draws(3, 200, 7), resample_draws(3, 200, 7)
    assert a.shape == (200, 3) and a.min() >= 0 and a.max() == 2
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, resample_draws(3, 200, 8))
    # not the image stream of the same seed
    image_draws = np.random.default_rng(7).integers(0, 3, size=(200, 3))
    assert not np.array_equal(a, image_draws)


def test_intervals_with_seeds_include_the_seed_variation():
    """A corruption whose seeds differ much: its interval widens with the seeds folded
    in, Clean's and a one-draw corruption's do not change."""
    rng = np.random.default_rng(11)
    ids = tuple(f'{i}.png' for i in range(12))
    clean = _seg_stats(rng)
    haze = _seg_stats(rng)
    noise = [_seg_stats(rng, scale=s) for s in (0.3, 0.65, 1.0)]
    stats = {Condition(): clean, Condition('haze', 1): haze,
             Condition('gaussian_noise', 1): noise[0]}
    further = {Condition('gaussian_noise', 1, seed=s): noise[s] for s in (1, 2)}
    results = {c: s.values()[0] for c, s in stats.items()}
    folded, block = fold_seeds(results, {c: s.values()[0] for c, s in further.items()}, 0)
    summary = aggregate(folded)
    summary.corruption_seeds = block
    wrap = lambda items: {c: ImageStats(ids, s) for c, s in items.items()}  # noqa: E731
    with_seeds = summary_intervals(summary, wrap(stats), resamples=400, seed=2,
                                   seed_stats=wrap(further))
    assert with_seeds['corruption_seeds'] == {'seeds': [0, 1, 2],
                                              'corruptions': ['gaussian_noise']}
    # independently: numpy on the areas, the same image and seed draws
    weights = resample_counts(12, 400, 2).astype(np.float64)
    draws = resample_draws(3, 400, 2)

    def miou(areas):
        sums = np.einsum('bn,nkc->bkc', weights, areas.astype(np.float64))
        iou = sums[..., 0] / (sums[..., 1] + sums[..., 2] - sums[..., 0])
        return 100 * iou.mean(axis=1)

    per_seed = np.stack([miou(s.areas) for s in noise], axis=1)
    replicates = np.take_along_axis(per_seed, draws, axis=1).mean(axis=1)
    assert with_seeds['conditions']['gaussian_noise@1'] == pytest.approx(
        _interval(replicates), abs=1e-9)
    avg = (replicates + miou(haze.areas)) / 2
    assert with_seeds['avg'] == pytest.approx(_interval(avg), abs=1e-9)
    assert with_seeds['clean'] == pytest.approx(_interval(miou(clean.areas)), abs=1e-9)
    # without the seed draws the noise interval is that of the image resamples only
    one_draw = per_seed.mean(axis=1)
    width = lambda i: i[1] - i[0]  # noqa: E731
    assert width(with_seeds['conditions']['gaussian_noise@1']) > \
        1.5 * width(_interval(one_draw))
    # missing statistics of a further seed: no intervals, said why
    partial = summary_intervals(summary, wrap(stats), resamples=50,
                                seed_stats={Condition('gaussian_noise', 1, seed=1):
                                            ImageStats(ids, noise[1])})
    assert not partial['available'] and '[2] of gaussian_noise@1' in partial['reason']


# ----------------------------------------------------------------------------- real sweeps
def _sweep(checkpoint, data_root, work_dir, **options):
    return run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=CORRUPTIONS,
                     severities=SEVERITIES, work_dir=work_dir,
                     cfg_options=sweep_options(data_root)[0], calibration=True,
                     bootstrap=300, **options)


@pytest.fixture(scope='module')
def seeded(demo_data, tmp_path_factory, seg_model):
    """A sweep of a briefly trained model with 3 corruption seeds."""
    root = str(tmp_path_factory.mktemp('corruption_seeds'))
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = seg_model.checkpoint
    outcome = _sweep(checkpoint, data_root, f'{root}/seeded', corruption_seeds=SEEDS)
    return dict(root=root, data_root=data_root, checkpoint=checkpoint, outcome=outcome)


def _record(work_dir, tag):
    with open(osp.join(work_dir, 'conditions', f'{tag}.json')) as handle:
        return json.load(handle)


def _document(work_dir):
    with open(osp.join(work_dir, 'results.json')) as handle:
        return json.load(handle)


@pytest.mark.slow
def test_a_seeded_sweep_reports_means_and_seed_intervals(seeded):
    outcome = seeded['outcome']
    work_dir = outcome.work_dir
    tags = sorted(c.tag for c in outcome.evaluated)
    assert tags == sorted(['clean', 'gaussian_noise_s1', 'gaussian_noise_s3', 'haze_s1',
                           'haze_s3', 'gaussian_noise_s1_seed1', 'gaussian_noise_s1_seed2',
                           'gaussian_noise_s3_seed1', 'gaussian_noise_s3_seed2'])
    document = _document(work_dir)
    numbers = document['numbers']
    rows = {r['condition']: r for r in numbers['conditions']}
    block = numbers['corruption_seeds']
    assert block['seeds'] == [0, 1, 2] and block['corruptions'] == ['gaussian_noise']
    for severity in SEVERITIES:
        key = f'gaussian_noise@{severity}'
        records = [_record(work_dir, f'gaussian_noise_s{severity}' + (f'_seed{s}' if s else ''))
                   for s in range(SEEDS)]
        assert [r['seed'] for r in records] == [0, 1, 2]
        values = [r['result']['value'] for r in records]
        assert rows[key]['value'] == pytest.approx(math.fsum(values) / 3, abs=1e-12)
        assert block['conditions'][key]['seeds'] == {str(s): v for s, v in enumerate(values)}
        for name, value in rows[key]['per_class'].items():
            assert value == pytest.approx(
                np.mean([r['result']['per_class'][name] for r in records]), abs=1e-9)
        assert rows[key]['extra']['calib/ECE'] == pytest.approx(
            np.mean([r['result']['extra']['calib/ECE'] for r in records]), abs=1e-12)
        # the interval: the three statistics files, resampled directly with numpy
        per_seed = []
        weights = resample_counts(3, 300, 0).astype(np.float64)
        for record in records:
            with open(osp.join(work_dir, 'conditions', record['images']['file']), 'rb') as f:
                areas = ImageStats.from_bytes(f.read()).task.areas.astype(np.float64)
            sums = np.einsum('bn,nkc->bkc', weights, areas)
            with np.errstate(invalid='ignore', divide='ignore'):
                iou = sums[..., 0] / (sums[..., 1] + sums[..., 2] - sums[..., 0])
            per_seed.append(100 * np.nanmean(iou, axis=1))
        replicates = np.take_along_axis(np.stack(per_seed, 1), resample_draws(3, 300, 0),
                                        axis=1).mean(1)
        assert numbers['intervals']['conditions'][key] == pytest.approx(
            _interval(replicates), abs=1e-9)
    assert 'haze@1' not in block['conditions']
    assert numbers['intervals']['corruption_seeds'] == {'seeds': [0, 1, 2],
                                                        'corruptions': ['gaussian_noise']}
    assert len(document['seed_image_stats']) == 4
    report = open(osp.join(work_dir, 'report.md')).read()
    assert '## Corruption seeds' in report
    assert 'draws the corruption seeds (0, 1, 2)' in report
    # the results file reads back; its statistics average the seeds like its cells
    results = read_results(osp.join(work_dir, 'results.json'))
    assert results.summary.corruption_seeds == block
    stats = results.image_stats()
    assert stats[Condition('gaussian_noise', 3)].task.values()[0] == pytest.approx(
        rows['gaussian_noise@3']['value'], abs=0.006)  # recorded values are rounded


@pytest.mark.slow
def test_seeds_resume_and_shrink_without_evaluating(seeded, tmp_path):
    work_dir = str(tmp_path / 'resume')
    shutil.copytree(seeded['outcome'].work_dir, work_dir)
    again = _sweep(seeded['checkpoint'], seeded['data_root'], work_dir,
                   corruption_seeds=SEEDS)
    assert again.evaluated == []
    fewer = _sweep(seeded['checkpoint'], seeded['data_root'], work_dir, corruption_seeds=2)
    assert fewer.evaluated == []
    numbers = _document(work_dir)['numbers']
    assert numbers['corruption_seeds']['seeds'] == [0, 1]
    values = [_record(work_dir, t)['result']['value']
              for t in ('gaussian_noise_s3', 'gaussian_noise_s3_seed1')]
    row = next(r for r in numbers['conditions'] if r['condition'] == 'gaussian_noise@3')
    assert row['value'] == pytest.approx(sum(values) / 2, abs=1e-12)
    one = _sweep(seeded['checkpoint'], seeded['data_root'], work_dir)
    assert one.evaluated == [] and 'corruption_seeds' not in _document(work_dir)['numbers']


@pytest.mark.slow
def test_a_further_seed_has_a_key_of_its_own(seeded, tmp_path):
    """Both seeds' records of one cell unusable: each is named by its own key (the first
    seed's 'gaussian_noise@3', the further seed's 'gaussian_noise@3/seed1'), evaluated
    again to the same numbers; the further seed's key reads back as its condition."""
    from reobench_mm.robustness.plan import SweepPlan
    work_dir = str(tmp_path / 'broken')
    shutil.copytree(seeded['outcome'].work_dir, work_dir)
    before = [_record(work_dir, t)['result']['value']
              for t in ('gaussian_noise_s3', 'gaussian_noise_s3_seed1')]
    for tag in ('gaussian_noise_s3', 'gaussian_noise_s3_seed1'):
        with open(osp.join(work_dir, 'conditions', f'{tag}.json'), 'w') as handle:
            handle.write('[]')
    again = _sweep(seeded['checkpoint'], seeded['data_root'], work_dir,
                   corruption_seeds=SEEDS)
    assert sorted(again.reevaluated) == ['gaussian_noise@3', 'gaussian_noise@3/seed1']
    assert sorted(c.tag for c in again.evaluated) == ['gaussian_noise_s3',
                                                      'gaussian_noise_s3_seed1']
    assert [_record(work_dir, t)['result']['value']
            for t in ('gaussian_noise_s3', 'gaussian_noise_s3_seed1')] == before
    plan = SweepPlan.create(['gaussian_noise'], [3], corruption_seeds=SEEDS)
    further = plan.seed_conditions[0]
    assert plan.key(further) == 'gaussian_noise@3/seed1' and plan.key(plan.clean) == 'clean'
    assert plan.condition('gaussian_noise@3/seed1') == further
    with pytest.raises(SweepError, match="'<corruption>@<severity>/seed<n>'"):
        plan.condition('gaussian_noise@3/seedx')


@pytest.mark.slow
def test_shards_of_the_tool_merge_to_the_same_numbers(seeded, tmp_path):
    """tools/robustness_test.py --corruption-seeds in two shards (one a subprocess), merged:
    the numbers of the unsharded sweep, intervals included."""
    folders = [str(tmp_path / f'shard{i}') for i in range(2)]
    arguments = sweep_options(seeded['data_root'])[1]
    first, second = (
        [osp.join('tools', 'robustness_test.py'), SEG_DEMO_CONFIG, seeded['checkpoint'],
         '--work-dir', folder, '--corruptions', *CORRUPTIONS, '--severities', '1', '3',
         '--calibration', '--bootstrap', '300', '--corruption-seeds', str(SEEDS),
         '--shard', f'{i}/2', '--cfg-options', *arguments]
        for i, folder in enumerate(folders))
    # the second shard in this process while the first runs in its own
    run_tools_together(first, meanwhile=lambda: call_tool_command(second))
    merged = merge_sweeps(folders, str(tmp_path / 'merged'), plots=False)
    expected = _document(seeded['outcome'].work_dir)['numbers']
    got = _document(osp.dirname(merged.files['results.json']))['numbers']
    assert got['corruption_seeds'] == expected['corruption_seeds']
    assert got['intervals'] == expected['intervals']
    assert got['conditions'] == expected['conditions']


@pytest.mark.slow
def test_paired_comparison_needs_the_same_draws(seeded, tmp_path):
    path = osp.join(seeded['outcome'].work_dir, 'results.json')
    untrained = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'untrained.pth'))
    other = str(tmp_path / 'other')
    _sweep(untrained, seeded['data_root'], other, corruption_seeds=SEEDS)
    comparison = compare_models([path, osp.join(other, 'results.json')], names=['a', 'b'],
                                n_bootstrap=100, permutations=99)
    versus = comparison.paired.versus['b']
    for name, folder in (('a', seeded['outcome'].work_dir), ('b', other)):
        row = next(r for r in _document(folder)['numbers']['conditions']
                   if r['condition'] == 'gaussian_noise@1')
        # the seed means, as the cells (recorded values are rounded to 2 decimals)
        value = versus.values_b if name == 'a' else versus.values_a
        assert value['gaussian_noise@1'] == pytest.approx(row['value'], abs=0.006)
    single = str(tmp_path / 'single')
    _sweep(untrained, seeded['data_root'], single)
    with pytest.raises(ValueError, match=r'gaussian_noise@1 with other corruption seeds '
                                         r'\(\[0, 1, 2\] and \[0\]\)'):
        compare_models([path, osp.join(single, 'results.json')], names=['a', 'c'],
                       n_bootstrap=50)
