"""Rank statistics of a cross-model comparison: every τ against scipy.stats.kendalltau of
rankings built in the test from the constructed values (rank 1 = best: highest metric,
lowest error), the calibration measures a model set carries, the mean τ over datasets
against numpy, the data-budget τ seed band against numpy, the intervals over images
against a direct bootstrap, the rank scatter and the command line."""
import csv
import json
import os
import os.path as osp

import numpy as np
import pytest
from scipy import stats

import reobench_mm  # noqa: F401
from reobench_mm.analysis.compare import CROSS_MODEL_FILES, compare_models, write_cross_model
from reobench_mm.analysis.data_budget import (data_budget_markdown, kendall_tau_by_fraction,
                                              summarize_seeds, write_data_budget_report)
from reobench_mm.analysis.model_plots import plot_rank_scatter
from reobench_mm.analysis.model_set import load_model_set
from reobench_mm.analysis.rank_report import RankOptions
from reobench_mm.analysis.rank_stability import (average_over_datasets, higher_is_better,
                                                 rank_statistics, rank_tau)
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.evaluation.functional.condition_stats import ImageStats
from reobench_mm.evaluation.functional.image_stats import (CalibrationImageStats,
                                                           SegmentationImageStats)
from reobench_mm.fileio import file_sha256
from reobench_cli import run_tool

from helpers import load_tool
from test_robustness_compare import VERSIONS, _sweep_models, _write_model

CORRUPTIONS = ('cloud', 'gaussian_noise')
SEVERITIES = (1, 3, 5)
MODELS = ['A', 'B', 'C', 'D', 'E']
#: carried by every model; Brier by some only (not carried)
CALIB = ('calib/ECE', 'calib/gap', 'calib/NLL', 'calib/eAURC', 'calib/acc@90cov')


def _write_calibrated(root, folder, conditions, model, image_files=None):
    """``root/folder/results.json``; ``conditions``: ``(name, severity) -> (value,
    {calibration key: value})``."""
    results = {c: ConditionResult(value, per_class=None, extra=extra)
               for c, (value, extra) in conditions.items()}
    out_dir = osp.join(str(root), folder)
    write_report(out_dir, results, protocol='reobench', task='segmentation', plots=False,
                 provenance=make_provenance(model=model, versions=VERSIONS),
                 image_files=image_files)
    return osp.join(out_dir, 'results.json')


def _data(seed=0, models=MODELS, brier_for=('A', 'B')):
    """model -> (name, severity) -> (value, extra), random, with a tie in mIoU at
    cloud@1 and in ECE at gaussian_noise@3."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, model in enumerate(models):
        conditions = {}
        for name, severity in [('clean', 0)] + [(c, s) for c in CORRUPTIONS for s in SEVERITIES]:
            extra = {'calib/ECE': float(rng.uniform(0.01, 0.2)),
                     'calib/gap': float(rng.uniform(-0.1, 0.1)),
                     'calib/NLL': float(rng.uniform(0.2, 1.5)),
                     'calib/eAURC': float(rng.uniform(0.005, 0.08)),
                     'calib/acc@90cov': float(rng.uniform(60, 95))}
            if model in brier_for:
                extra['calib/Brier'] = float(rng.uniform(0.1, 0.5))
            conditions[(name, severity)] = (float(rng.uniform(30, 80)), extra)
        conditions[('cloud', 1)] = (50.0 if i < 2 else conditions[('cloud', 1)][0],
                                    conditions[('cloud', 1)][1])
        if i < 2:
            conditions[('gaussian_noise', 3)][1]['calib/ECE'] = 0.1
        out[model] = conditions
    return out


def _files(root, data, order=None):
    return [_write_calibrated(root, f'dir_{m}', data[m], m) for m in (order or list(data))]


def _value(data, model, measure, condition):
    """A measure under a named condition, directly from the constructed values."""
    def cell(name, severity):
        value, extra = data[model][(name, severity)]
        return value if measure == 'mIoU' else extra[measure]

    if condition == 'clean':
        return cell('clean', 0)
    name, _, rest = condition.partition('@')
    if condition == 'avg':
        return np.mean([np.mean([cell(c, s) for s in SEVERITIES]) for c in CORRUPTIONS])
    if name == 'sev':
        return np.mean([cell(c, int(rest)) for c in CORRUPTIONS])
    if rest == 'mean':
        return np.mean([cell(name, s) for s in SEVERITIES])
    return cell(name, int(rest))


def _ranks(data, models, measure, condition):
    """Rank 1 = best, written out here: higher mIoU / acc@90cov, lower errors."""
    values = np.array([_value(data, m, measure, condition) for m in models])
    better_high = measure in ('mIoU', 'calib/acc@90cov')
    return stats.rankdata(-values if better_high else values)


def _expected(data, models, reference, target):
    return stats.kendalltau(_ranks(data, models, *reference), _ranks(data, models, *target),
                            variant='b')


ALL_CONDITIONS = (['clean'] + [f'{c}@{s}' for c in CORRUPTIONS for s in SEVERITIES]
                  + [f'{c}@mean' for c in CORRUPTIONS] + [f'sev@{s}' for s in SEVERITIES]
                  + ['avg'])


@pytest.fixture(scope='module')
def sweep(tmp_path_factory):
    data = _data()
    root = tmp_path_factory.mktemp('rank')
    with pytest.warns(UserWarning, match='calib/Brier is not reported'):
        model_set = load_model_set(_files(root, data))
    return data, model_set, root


# --------------------------------------------------------------------------- model set
def test_model_set_carries_every_calibration_measure(sweep):
    data, ms, _ = sweep
    assert ms.measures == ['mIoU', 'calib/ECE']  # what rank stability and the tables use
    assert ms.all_measures == ['mIoU', 'calib/ECE', 'calib/gap', 'calib/NLL', 'calib/eAURC',
                               'calib/acc@90cov']
    assert any('calib/Brier' in n and 'not ranked' in n and 'C, D, E' in n for n in ms.notes)
    assert ms.condition_keys() == ALL_CONDITIONS
    for measure in ms.all_measures:
        for condition in ALL_CONDITIONS:
            np.testing.assert_allclose(
                ms.values_at(measure, condition),
                [_value(data, m, measure, condition) for m in MODELS], rtol=1e-12)
    with pytest.raises(ValueError, match=r"unknown condition 'sev@2'.*sev@<k>: \[1, 3, 5\]"):
        ms.values_at('mIoU', 'sev@2')
    with pytest.raises(ValueError, match="unknown measure 'calib/Brier'"):
        ms.values_at('calib/Brier', 'clean')
    # without a calibration key nothing else is carried (the comparison table)
    plain = load_model_set(ms.paths, calibration_key=None)
    assert plain.all_measures == ['mIoU'] and plain.measures == ['mIoU']


def test_files_with_ece_only(tmp_path):
    paths = [_write_model(tmp_path, f'm{i}', {('clean', 0): (60.0 + i, 0.1 - 0.01 * i),
                                              ('cloud', 3): (50.0 - i, 0.1 + 0.01 * i),
                                              ('cloud', 5): (40.0 + 2 * i, 0.2)},
                          model=f'M{i}') for i in range(3)]
    ms = load_model_set(paths)
    assert ms.all_measures == ms.measures == ['mIoU', 'calib/ECE']
    result = rank_statistics(ms)
    assert {r.group for r in result.rows} == {'metric_to_ece', 'clean_to_shifted',
                                              'severity_pairs'}
    assert result.get(('mIoU', 'clean'), ('calib/ECE', 'clean')).tau == pytest.approx(1.0)
    assert result.get(('mIoU', 'clean'), ('mIoU', 'cloud@3')).tau == pytest.approx(-1.0)
    # a constant ranking (ECE 0.2 for every model at cloud@5): τ undefined
    assert np.isnan(result.get(('calib/ECE', 'sev@3'), ('calib/ECE', 'sev@5')).tau)


# --------------------------------------------------------------------------- τ
def test_orientation_best_is_rank_one(tmp_path):
    """Clean mIoU 40..80 and ECE falling as mIoU rises: the most accurate model is the
    best calibrated, so τ(mIoU → ECE) = +1; acc@90cov rising with mIoU: +1 too."""
    paths = []
    for i, model in enumerate('PQRS'):
        extra = {'calib/ECE': 0.2 - 0.04 * i, 'calib/acc@90cov': 60.0 + 5 * i}
        paths.append(_write_calibrated(tmp_path, model, {('clean', 0): (40.0 + 10 * i, extra),
                                                         ('cloud', 1): (30.0 + 10 * i, extra)},
                                       model))
    ms = load_model_set(paths)
    assert rank_tau(ms, ('mIoU', 'clean'), ('calib/ECE', 'clean')).tau == pytest.approx(1.0)
    assert rank_tau(ms, ('mIoU', 'clean'), ('calib/acc@90cov', 'avg')).tau == \
        pytest.approx(1.0)
    assert rank_tau(ms, ('calib/ECE', 'clean'), ('calib/ECE', 'avg')).tau == pytest.approx(1.0)
    assert higher_is_better('mIoU', 'mIoU') and not higher_is_better('calib/eAURC', 'mIoU')
    assert not higher_is_better('calib_ts/NLL', 'mIoU')
    with pytest.raises(ValueError, match='signed'):
        higher_is_better('calib/gap', 'mIoU')


def test_every_standard_row_against_scipy(sweep):
    data, ms, _ = sweep
    result = rank_statistics(ms)
    assert result.severity_pairs == [(1, 3), (1, 5), (3, 5)]
    ranked = ['mIoU', 'calib/ECE', 'calib/NLL', 'calib/eAURC', 'calib/acc@90cov']
    assert list(result.measures) == ranked
    others = ranked[2:]
    summary = ['clean', 'sev@1', 'sev@3', 'sev@5', 'avg']
    expected_keys = {
        'metric_to_ece': {('mIoU', 'clean', 'calib/ECE', c) for c in ALL_CONDITIONS},
        'metric_to_calibration': {('mIoU', 'clean', m, c) for m in others for c in summary},
        'clean_to_shifted': {(m, 'clean', m, c) for m in ranked for c in ALL_CONDITIONS[1:]},
        'severity_pairs': {(m, f'sev@{k}', m, f'sev@{s}') for m in ranked
                           for k, s in [(1, 3), (1, 5), (3, 5)]}}
    for group, keys in expected_keys.items():
        assert {r.key for r in result.rows if r.group == group} == keys, group
    assert len(result.rows) == sum(map(len, expected_keys.values()))
    for row in result.rows:
        expected = _expected(data, MODELS, row.reference, row.target)
        assert row.tau == pytest.approx(expected.statistic, abs=1e-12), row.key
        assert row.p_value == pytest.approx(expected.pvalue, abs=1e-12), row.key
        assert row.interval is None
    # the metric's and ECE's clean → shifted τ are rank stability's
    from reobench_mm.analysis.rank_stability import rank_stability
    stability = rank_stability(ms).measures
    for measure in ('mIoU', 'calib/ECE'):
        for r in stability[measure].conditions + stability[measure].corruption_means:
            assert result.get((measure, 'clean'), (measure, r.condition)).tau == \
                pytest.approx(r.tau)


def test_asked_rows_and_severity_pairs(sweep):
    data, ms, _ = sweep
    references = [('mIoU', 'clean'), ('calib/NLL', 'gaussian_noise@5')]
    targets = [('calib/ECE', 'gaussian_noise@5'), ('calib/eAURC', 'avg'), ('mIoU', 'sev@5')]
    result = rank_statistics(ms, severity_pairs=[(3, 5)], references=references,
                             targets=targets)
    custom = [r for r in result.rows if r.group == 'custom']
    assert [r.key for r in custom] == [(*a, *b) for a in references for b in targets]
    for row in custom:
        assert row.tau == pytest.approx(_expected(data, MODELS, row.reference,
                                                  row.target).statistic, abs=1e-12)
    pairs = [r for r in result.rows if r.group == 'severity_pairs']
    assert {r.key[1:4:2] for r in pairs} == {('sev@3', 'sev@5')}
    one = rank_tau(ms, ('mIoU', 'clean'), ('calib/ECE', 'gaussian_noise@5'))
    assert one.tau == pytest.approx(_expected(data, MODELS, ('mIoU', 'clean'),
                                              ('calib/ECE', 'gaussian_noise@5')).statistic)
    with pytest.raises(ValueError, match=r'severities \[2\].*valid: \[1, 3, 5\]'):
        rank_statistics(ms, severity_pairs=[(2, 5)])
    with pytest.raises(ValueError, match='both references and targets'):
        rank_statistics(ms, references=references)
    with pytest.raises(ValueError, match='signed'):
        rank_tau(ms, ('mIoU', 'clean'), ('calib/gap', 'clean'))
    with pytest.raises(ValueError, match="unknown condition 'fog@1'"):
        rank_tau(ms, ('mIoU', 'clean'), ('mIoU', 'fog@1'))


# --------------------------------------------------------------------------- datasets
def test_mean_over_datasets_against_numpy(sweep, tmp_path):
    data, ms, _ = sweep
    other = _data(seed=1)
    # the same models in another order: matched by name
    ms2 = load_model_set(_files(tmp_path / 'd2', other, order=MODELS[::-1]))
    third = _data(seed=2)
    for model in MODELS:  # ECE constant under cloud@5: τ undefined in that dataset
        third[model][('cloud', 5)][1]['calib/ECE'] = 0.05
    ms3 = load_model_set(_files(tmp_path / 'd3', third))
    average = average_over_datasets([ms, ms2, ms3], ['P', 'V', 'X'],
                                    references=[('mIoU', 'clean')],
                                    targets=[('calib/ECE', 'avg')])
    assert average.labels == ['P', 'V', 'X'] and sorted(average.models) == MODELS
    datasets = [(data, MODELS), (other, MODELS[::-1]), (third, MODELS)]
    keys = {r.key for r in rank_statistics(ms, references=[('mIoU', 'clean')],
                                           targets=[('calib/ECE', 'avg')]).rows}
    assert {r.key for r in average.rows} == keys
    undefined = 0
    for row in average.rows:
        ref, tgt = row.key[:2], row.key[2:]
        taus = np.array([_expected(d, m, ref, tgt).statistic for d, m in datasets])
        np.testing.assert_allclose(row.per_dataset, taus, atol=1e-12)
        defined = taus[np.isfinite(taus)]
        assert row.n_defined == defined.size
        assert row.tau == pytest.approx(np.mean(defined), abs=1e-12)
        undefined += defined.size < 3
    assert undefined > 0  # the constant ECE of the third dataset
    row = next(r for r in average.rows if r.key == ('mIoU', 'clean', 'calib/ECE', 'cloud@5'))
    assert row.n_defined == 2 and np.isnan(row.per_dataset[2])
    # other model names are refused, the difference named
    renamed = {('Z' if m == 'E' else m): v for m, v in other.items()}
    ms_other = load_model_set(_files(tmp_path / 'd4', renamed))
    with pytest.raises(ValueError, match=r"same models.*only in P: \['E'\]; only in V: "
                                         r"\['Z'\]"):
        average_over_datasets([ms, ms_other], ['P', 'V'])
    with pytest.raises(ValueError, match='at least 2'):
        average_over_datasets([ms])


# --------------------------------------------------------------------------- data budget
def _budget_rows(rng, models, fractions, seeds, conditions):
    rows = []
    for model in models:
        for fraction in fractions:
            for seed in seeds:
                values = {c: float(rng.uniform(10, 60)) for c in conditions}
                ece = {c: float(rng.uniform(0.01, 0.2)) for c in conditions}
                clean = float(rng.uniform(60, 80))
                avg = float(np.mean(list(values.values())))
                rows.append(dict(
                    model=model, fraction=fraction, seed=seed, num_train_images=10,
                    full_train_images=100, metric='mIoU', clean=clean, conditions=values,
                    per_corruption={c.split('@')[0]: v for c, v in values.items()},
                    corrupted_avg=avg, delta_tp=clean - avg,
                    ece_clean=float(rng.uniform(0.01, 0.1)), ece_conditions=ece,
                    ece_corrupted_avg=float(np.mean(list(ece.values())))))
    return rows


def test_data_budget_tau_seed_band_against_numpy(tmp_path):
    rng = np.random.default_rng(4)
    models, fractions, seeds = ['A', 'B', 'C', 'D'], [0.1, 0.5, 1.0], [0, 1, 2, 3]
    conditions = ['cloud@3', 'haze@3', 'gaussian_noise@3']
    seed_rows = _budget_rows(rng, models, fractions, seeds, conditions)
    rows = summarize_seeds(seed_rows)
    tau = kendall_tau_by_fraction(rows)
    by_run = {(r['model'], r['fraction'], r['seed']): r for r in seed_rows}
    means = {(r['model'], r['fraction']): r for r in rows}
    for entry in tau['by_fraction']:
        f = entry['fraction']
        for key in ('clean', 'corrupted_avg', 'ece_clean', 'ece_corrupted_avg'):
            per_seed = np.array([stats.kendalltau(
                [by_run[(m, f, s)][key] for m in models],
                [by_run[(m, 1.0, s)][key] for m in models]).statistic for s in seeds])
            band = entry[key]['seed_band']
            assert entry[key]['per_seed'] == pytest.approx(
                {str(s): t for s, t in zip(seeds, per_seed)})
            assert band['n'] == 4
            assert band['mean'] == pytest.approx(np.mean(per_seed), abs=1e-12)
            assert band['std'] == pytest.approx(np.std(per_seed, ddof=1), abs=1e-12)
            assert (band['min'], band['max']) == pytest.approx((per_seed.min(),
                                                                per_seed.max()))
            # beside it, the τ of the seed means (unchanged)
            assert entry[key]['tau'] == pytest.approx(stats.kendalltau(
                [means[(m, f)][key] for m in models],
                [means[(m, 1.0)][key] for m in models]).statistic)
    assert tau['by_fraction'][-1]['clean']['seed_band'] == dict(
        n=4, mean=1.0, std=0.0, min=1.0, max=1.0)
    # one model: the conditions ranked per seed
    one_rows = _budget_rows(rng, ['A'], [0.2, 1.0], [5, 6], conditions)
    entry = kendall_tau_by_fraction(summarize_seeds(one_rows))['by_fraction'][0]['conditions']
    assert set(entry['per_seed']) == {'5', '6'} and entry['seed_band']['n'] == 2
    runs = {(r['fraction'], r['seed']): r['conditions'] for r in one_rows}
    expected = [stats.kendalltau([runs[(0.2, s)][c] for c in conditions],
                                 [runs[(1.0, s)][c] for c in conditions]).statistic
                for s in (5, 6)]
    assert entry['seed_band']['mean'] == pytest.approx(np.mean(expected), abs=1e-12)
    assert entry['seed_band']['std'] == pytest.approx(np.std(expected, ddof=1), abs=1e-12)
    # written into data_budget.json and .md
    doc = dict(metric='mIoU', protocol='reobench', corruption_seed=0, seeds=seeds,
               models=models, conditions=conditions, rows=rows, seed_rows=seed_rows,
               kendall_tau=tau)
    files = write_data_budget_report(str(tmp_path), doc, plots=False)
    written = json.load(open(files['data_budget.json']))
    assert written['kendall_tau']['by_fraction'][0]['clean']['seed_band'] == \
        pytest.approx(tau['by_fraction'][0]['clean']['seed_band'])
    markdown = data_budget_markdown(doc)
    band = tau['by_fraction'][0]['ece_clean']['seed_band']
    assert 'τ ECE clean per seed' in markdown
    assert f'{band["mean"]:.3f} ± {band["std"]:.3f} [{band["min"]:.3f} – ' \
        f'{band["max"]:.3f}] (n = 4)' in markdown


# --------------------------------------------------------------------------- intervals
def _stats_files(folder, rng, n_images, ids):
    """Per-image statistics of one model's conditions (one class, 5 confidence bins),
    written as the sweep writes them; returns condition -> (mIoU, ECE, NLL) and the files."""
    os.makedirs(folder, exist_ok=True)
    numbers, files, raw = {}, {}, {}
    for name, severity in [('clean', 0)] + [(c, s) for c in CORRUPTIONS for s in SEVERITIES]:
        inter = rng.integers(200, 900, n_images)
        areas = np.stack([inter, inter, np.full(n_images, 1000)], axis=-1)[:, None, :]
        counts = rng.integers(50, 100, (n_images, 5)).astype(float)
        conf = counts * rng.uniform(0.3, 0.95, (n_images, 5))
        correct = np.minimum(counts, np.round(conf * rng.uniform(0.7, 1.2, (n_images, 5))))
        bins = np.stack([counts, conf, correct], axis=-1)
        sums = np.stack([counts.sum(1) * rng.uniform(0.2, 1.2, n_images),
                         counts.sum(1) * rng.uniform(0.1, 0.5, n_images)], axis=-1)
        stats_ = ImageStats(ids, SegmentationImageStats(areas),
                            {'calib': CalibrationImageStats(bins, sums)})
        path = osp.join(folder, f'{name}_{severity}.npz')
        with open(path, 'wb') as handle:
            handle.write(stats_.to_bytes())
        files[(name, severity)] = (path, file_sha256(path))
        raw[(name, severity)] = (inter, bins, sums)
        calib = stats_.calibration['calib'].values()
        numbers[(name, severity)] = (float(stats_.task.values()[0]), float(calib['ECE'][0]),
                                     float(calib['NLL'][0]))
    return numbers, files, raw


def test_intervals_over_images_against_a_direct_bootstrap(tmp_path):
    rng = np.random.default_rng(7)
    n_images, resamples, seed = 12, 60, 3
    ids = [f'{i:03d}.png' for i in range(n_images)]
    paths, raws = [], []
    for model in 'KLMN':
        numbers, files, raw = _stats_files(str(tmp_path / model), rng, n_images, ids)
        conditions = {c: (v, {'calib/ECE': e, 'calib/NLL': nll,
                              'calib/eAURC': float(rng.uniform(0.01, 0.05))})
                      for c, (v, e, nll) in numbers.items()}
        paths.append(_write_calibrated(tmp_path, model, conditions, model, image_files=files))
        raws.append(raw)
    comparison = compare_models(paths, n_bootstrap=resamples, seed=seed, permutations=99)
    ranks = comparison.ranks
    assert ranks.intervals['images'] == n_images and ranks.intervals['resamples'] == resamples
    assert ranks.intervals['measures'] == ['calib/ECE', 'calib/NLL', 'mIoU']
    # the resamples, drawn here as counts of each image
    draws = np.random.default_rng(seed).integers(0, n_images, (resamples, n_images))
    weights = np.stack([np.bincount(row, minlength=n_images) for row in draws]).astype(float)

    def replicate(raw, measure, condition):
        def cell(key):
            inter, bins, sums = raw[key]
            if measure == 'mIoU':
                return 100 * (weights @ inter) / (weights @ np.full(n_images, 1000.0))
            total = np.einsum('bn,nkj->bkj', weights, bins)
            count = total[..., 0].sum(1)
            if measure == 'calib/ECE':
                return np.abs(total[..., 1] - total[..., 2]).sum(1) / count
            return (weights @ sums[:, 0]) / count
        if condition == 'clean':
            return cell(('clean', 0))
        name, _, rest = condition.partition('@')
        if condition == 'avg':
            return np.mean([np.mean([cell((c, s)) for s in SEVERITIES], axis=0)
                            for c in CORRUPTIONS], axis=0)
        if name == 'sev':
            return np.mean([cell((c, int(rest))) for c in CORRUPTIONS], axis=0)
        if rest == 'mean':
            return np.mean([cell((name, s)) for s in SEVERITIES], axis=0)
        return cell((name, int(rest)))

    checked = 0
    for row in ranks.statistics.rows:
        (rm, rc), (tm, tc) = row.reference, row.target
        if 'calib/eAURC' in (rm, tm):
            assert row.interval is None  # no per-image statistics of eAURC
            continue
        sign = {m: 1 if m == 'mIoU' else -1 for m in (rm, tm)}
        x = np.stack([sign[rm] * replicate(r, rm, rc) for r in raws], axis=1)
        y = np.stack([sign[tm] * replicate(r, tm, tc) for r in raws], axis=1)
        taus = [stats.kendalltau(a, b).statistic for a, b in zip(x, y)]
        assert row.interval == pytest.approx(list(np.percentile(taus, [2.5, 97.5])),
                                             abs=1e-9), row.key
        checked += 1
    assert checked > 40
    # the metric's clean → avg interval is the paired tests' (same resamples, same τ)
    avg = ranks.statistics.get(('mIoU', 'clean'), ('mIoU', 'avg'))
    assert avg.interval == pytest.approx(comparison.paired.tau['avg']['interval'])
    files = write_cross_model(comparison, str(tmp_path / 'out'), plots=False)
    with open(files['rank_statistics.csv'], newline='') as handle:
        lines = list(csv.DictReader(handle))
    line = next(r for r in lines if (r['group'], r['target_condition']) ==
                ('clean_to_shifted', 'avg') and r['target_measure'] == 'mIoU')
    assert [float(line['ci_low']), float(line['ci_high'])] == pytest.approx(avg.interval)


# --------------------------------------------------------------------------- files, plot, tool
def test_written_files_and_rank_scatter(sweep, tmp_path):
    data, ms, root = sweep
    with pytest.warns(UserWarning):
        comparison = compare_models(ms.paths, n_bootstrap=20, seed=0, rank_options=RankOptions(
            references=[('mIoU', 'clean')], targets=[('calib/NLL', 'sev@5')],
            severity_pairs=[(3, 5)], scatter_conditions=['clean', 'gaussian_noise@5', 'avg']))
    out = tmp_path / 'out'
    files = write_cross_model(comparison, str(out))
    assert 'rank_statistics.csv' in CROSS_MODEL_FILES
    with open(files['rank_statistics.csv'], newline='') as handle:
        lines = list(csv.DictReader(handle))
    rows = comparison.ranks.statistics.rows
    assert len(lines) == len(rows)
    for line, row in zip(lines, rows):
        assert (line['reference_measure'], line['reference_condition'],
                line['target_measure'], line['target_condition']) == row.key
        expected = _expected(data, MODELS, row.reference, row.target).statistic
        assert float(line['tau']) == pytest.approx(expected, abs=1e-12)
        assert line['ci_low'] == ''  # no per-image statistics
    doc = json.loads((out / 'cross_model.json').read_text(encoding='utf-8'))
    block = doc['rank_statistics']
    assert block['severity_pairs'] == [[3, 5]]
    assert block['measures']['calib/eAURC'] == {'higher_is_better': False}
    custom = [r for r in block['rows'] if r['group'] == 'custom']
    assert custom[0]['target'] == {'measure': 'calib/NLL', 'condition': 'sev@5'}
    markdown = (out / 'cross_model.md').read_text(encoding='utf-8')
    assert '## Rank statistics' in markdown and '### Severity k → severity m' in markdown
    ece_avg = comparison.ranks.statistics.get(('mIoU', 'clean'), ('calib/ECE', 'avg'))
    assert f'{ece_avg.tau:.3f}' in markdown.split('### Clean mIoU → calibration')[1]
    png = out / 'rank_scatter.png'
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and files['rank_scatter.png'] == str(png)
    # no calibration number: no scatter, an error when asked directly
    plain = load_model_set(_sweep_models(tmp_path / 'plain', 3), calibration_key=None)
    with pytest.raises(ValueError, match='no calibration number'):
        plot_rank_scatter(plain, str(tmp_path / 'none.png'))


def test_command_line(sweep, tmp_path, capsys):
    data, ms, _ = sweep
    other = _data(seed=5)
    second = _files(tmp_path / 'second', other)
    tool = load_tool('analysis_tools/robustness_compare.py')
    out = tmp_path / 'cli'
    assert run_tool(tool.main, [*ms.paths, '--out-dir', str(out), '--bootstrap', '0',
                                '--no-plots', '--rank-reference', 'mIoU:clean',
                                '--rank-target', 'calib/ECE:gaussian_noise@5',
                                'calib/eAURC:avg', '--severity-pairs', '3:5',
                                '--average-dataset', *second,
                                '--dataset-labels', 'Potsdam', 'Other']) == 0
    captured = capsys.readouterr()
    assert '### Mean over 2 datasets' in captured.out
    with open(out / 'rank_statistics_datasets.csv', newline='') as handle:
        lines = list(csv.DictReader(handle))
    line = next(r for r in lines if r['group'] == 'custom' and
                r['target_condition'] == 'gaussian_noise@5')
    taus = [_expected(d, MODELS, ('mIoU', 'clean'), ('calib/ECE', 'gaussian_noise@5'))
            .statistic for d in (data, other)]
    assert float(line['tau Potsdam']) == pytest.approx(taus[0])
    assert float(line['mean_tau']) == pytest.approx(np.mean(taus))
    assert {r['reference_condition'] for r in lines if r['group'] == 'severity_pairs'} == \
        {'sev@3'}
    for extra, message in [(['--rank-reference', 'mIoU'], 'MEASURE:CONDITION'),
                           (['--rank-reference', 'mIoU:clean'], 'go together'),
                           (['--severity-pairs', '3-5'], 'K:M'),
                           (['--average-dataset', second[0]], 'one file per model'),
                           (['--dataset-labels', 'a'], 'needs --average-dataset')]:
        with pytest.raises(SystemExit):
            tool.main([*ms.paths, '--out-dir', str(out), *extra])
        assert message in capsys.readouterr().err
    assert run_tool(tool.main, [*ms.paths, '--out-dir', str(out), '--bootstrap', '0',
                                '--no-plots', '--severity-pairs', '2:5']) == 2
    assert 'severities [2]' in capsys.readouterr().err
