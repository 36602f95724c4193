"""Cross-model analysis: Kendall τ against a direct pair count, rank stability of
known sweeps, the effective-robustness fit against numpy.polyfit, a reproduced
bootstrap, input errors, many models, the rules on conditions and names every comparison
shares, the table and the comparison tools giving the same numbers, and the
command-line tool."""
import csv
import itertools
import json
import math
import os
import os.path as osp

import numpy as np
import pytest
from scipy import special, stats

import reobench_mm  # noqa: F401
from reobench_mm.analysis.compare import (CROSS_MODEL_FILES, CROSS_MODEL_PLOTS,
                                          compare_models, write_cross_model)
from reobench_mm.analysis.effective_robustness import (effective_robustness,
                                                       effective_robustness_fit, fit_line)
from reobench_mm.analysis.model_set import (build_comparison, comparison_table,
                                            load_model_set, load_shift_values)
from reobench_mm.analysis.rank_stability import kendall_tau, rank_stability
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import AVG, SHIFT, ConditionResult
from reobench_mm.evaluation.keys import ECE_KEY as CALIBRATION_KEY
from reobench_cli import run_tool

from helpers import load_tool, tool_result
VERSIONS = {'numpy': '0'}  # fixed: no package metadata look-ups


def _write_model(root, folder, conditions, model=None, task='segmentation'):
    """Write ``root/folder/results.json``; ``conditions`` maps ``(name, severity)``
    to ``value`` or ``(value, ece)``."""
    results = {}
    for condition, entry in conditions.items():
        value, ece = entry if isinstance(entry, tuple) else (entry, None)
        results[condition] = ConditionResult(
            value, per_class=None, extra={} if ece is None else {CALIBRATION_KEY: ece})
    out_dir = osp.join(str(root), folder)
    write_report(out_dir, results, protocol='reobench', task=task,
                 provenance=make_provenance(model=model, versions=VERSIONS), plots=False)
    return osp.join(out_dir, 'results.json')


def _pair_count_tau(x, y):
    """Kendall τ-b from a direct count of concordant / discordant / tied pairs."""
    concordant = discordant = tied_x = tied_y = pairs = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        pairs += 1
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        tied_x += dx == 0
        tied_y += dy == 0
        if dx * dy > 0:
            concordant += 1
        elif dx * dy < 0:
            discordant += 1
    return (concordant - discordant) / math.sqrt((pairs - tied_x) * (pairs - tied_y))


# --------------------------------------------------------------------------- Kendall τ
@pytest.mark.parametrize('x, y', [
    ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
    ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
    ([10, 20, 30, 40, 50, 60], [12, 25, 21, 48, 60, 33]),
    ([1, 2, 2, 3, 4], [2, 1, 3, 3, 5]),               # ties on both sides
    ([70, 70, 60, 55, 40, 40, 30], [50, 49, 49, 20, 30, 35, 10]),
])
def test_kendall_tau_matches_pair_count_and_scipy(x, y):
    tau, p_value = kendall_tau(x, y)
    assert tau == pytest.approx(_pair_count_tau(np.array(x, float), np.array(y, float)))
    reference = stats.kendalltau(x, y, variant='b')
    assert tau == pytest.approx(reference.statistic)
    assert p_value == pytest.approx(reference.pvalue)


def test_kendall_tau_constant_input_is_nan():
    tau, p_value = kendall_tau([1, 2, 3], [5, 5, 5])
    assert math.isnan(tau) and math.isnan(p_value)


# --------------------------------------------------------------------------- rank stability
CLEAN = [(40.0, 0.10), (50.0, 0.08), (60.0, 0.06), (70.0, 0.04)]
# Per condition, the 4 models' (value, ECE):
SWEEP = {
    ('cloud', 1): [(35.0, 0.11), (45.0, 0.09), (55.0, 0.07), (65.0, 0.05)],  # same order
    ('cloud', 2): [(48.0, 0.05), (41.0, 0.06), (33.0, 0.07), (20.0, 0.08)],  # reversed
    ('haze', 1): [(30.0, 0.12), (30.0, 0.12), (50.0, 0.03), (45.0, 0.04)],   # tie, swap
    ('haze', 2): [(20.0, 0.20), (32.0, 0.10), (25.0, 0.15), (40.0, 0.05)],
}
NAMES = ['Alpha', 'Beta', 'Gamma', 'Delta']


@pytest.fixture(scope='module')
def known_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp('known')
    paths = []
    for i, name in enumerate(NAMES):
        conditions = {('clean', 0): CLEAN[i]}
        conditions.update({c: values[i] for c, values in SWEEP.items()})
        paths.append(_write_model(root, f'dir_{name}', conditions, model=name))
    return paths


def test_rank_stability_of_known_sweep(known_sweep):
    model_set = load_model_set(known_sweep)
    assert model_set.models == NAMES
    assert model_set.measures == ['mIoU', CALIBRATION_KEY]
    assert model_set.corruptions == ['cloud', 'haze'] and model_set.severities == [1, 2]
    rank = rank_stability(model_set).measures
    metric = rank['mIoU']
    clean = np.array([v for v, _ in CLEAN])
    taus = {r.condition: r.tau for r in metric.conditions}
    for (name, severity), values in SWEEP.items():
        direct = _pair_count_tau(clean, np.array([v for v, _ in values]))
        assert taus[f'{name}@{severity}'] == pytest.approx(direct)
    assert taus['cloud@1'] == pytest.approx(1.0) and taus['cloud@2'] == pytest.approx(-1.0)
    assert metric.mean_tau_per_severity[1] == pytest.approx((taus['cloud@1'] +
                                                             taus['haze@1']) / 2)
    assert metric.mean_tau_per_severity[2] == pytest.approx((taus['cloud@2'] +
                                                             taus['haze@2']) / 2)
    # top-1: Delta clean; cloud@2 -> Alpha, haze@1 -> Gamma
    assert metric.clean_top1 == ['Delta']
    changed = {r.condition: r.top1_changed for r in metric.conditions}
    assert changed == {'cloud@1': False, 'cloud@2': True, 'haze@1': True, 'haze@2': False}
    assert metric.top1_changed_fraction == pytest.approx(0.5)
    # corruption means: cloud mean = (v1 + v2) / 2 for each model
    means = {r.condition: r for r in metric.corruption_means}
    cloud_mean = np.array([(a[0] + b[0]) / 2 for a, b in zip(SWEEP[('cloud', 1)],
                                                            SWEEP[('cloud', 2)])])
    assert means['cloud@mean'].tau == pytest.approx(_pair_count_tau(clean, cloud_mean))
    assert means['cloud@mean'].p_value == pytest.approx(
        stats.kendalltau(clean, cloud_mean).pvalue)
    avg = np.mean([[np.mean([SWEEP[(c, s)][i][0] for s in (1, 2)]) for c in ('cloud', 'haze')]
                   for i in range(4)], axis=1)
    assert means[AVG].tau == pytest.approx(_pair_count_tau(clean, avg))
    # ECE: lower is better -> Delta best on clean
    ece = rank[CALIBRATION_KEY]
    assert not ece.higher_is_better and ece.clean_top1 == ['Delta']
    clean_ece = np.array([e for _, e in CLEAN])
    for row in ece.conditions:
        values = np.array([e for _, e in SWEEP[(row.corruption, row.severity)]])
        assert row.tau == pytest.approx(_pair_count_tau(clean_ece, values))
    assert {r.condition: r.top1 for r in ece.conditions}['cloud@2'] == ['Alpha']


def test_calibration_skipped_and_conditions_dropped(tmp_path):
    a = _write_model(tmp_path, 'a', {('clean', 0): (60.0, 0.05), ('cloud', 1): (50.0, 0.06),
                                     ('cloud', 2): (40.0, 0.07), ('rotate', 1): (30.0, 0.1)},
                     model='A')
    b = _write_model(tmp_path, 'b', {('clean', 0): 70.0, ('cloud', 1): 55.0,
                                     ('cloud', 2): 45.0}, model='B')
    c = _write_model(tmp_path, 'folder_c', {('clean', 0): (65.0, 0.04), ('cloud', 1): 52.0,
                                            ('cloud', 2): 41.0})
    # by default files of different conditions are refused, naming what each lacks
    with pytest.raises(ValueError) as refused:
        load_model_set([a, b, c])
    message = str(refused.value)
    assert 'do not hold the same conditions' in message and '--common-conditions' in message
    assert f'{b} (evaluated at severities 1, 2) lacks rotate (not evaluated)' in message
    assert f'{c} (evaluated at severities 1, 2) lacks rotate (not evaluated)' in message
    assert f'{a} ' not in message
    with pytest.warns(UserWarning) as record:
        model_set = load_model_set([a, b, c], common_conditions=True)
    messages = ' '.join(str(w.message) for w in record)
    assert 'rotate@1' in messages and CALIBRATION_KEY in messages
    assert 'restricted, as asked (--common-conditions), to the 3 conditions' in messages
    assert model_set.models == ['A', 'B', 'folder_c']
    assert model_set.dropped == {'A': ['rotate@1']}
    assert model_set.measures == ['mIoU']
    assert [c for c in model_set.conditions] == [('clean', 0), ('cloud', 1), ('cloud', 2)]
    # the numbers are those of the restricted conditions: A's Avg without rotate
    assert model_set.corruption_mean(AVG).tolist() == [45.0, 50.0, 46.5]
    assert model_set.delta_tp().tolist() == [15.0, 20.0, 18.5]
    with pytest.raises(ValueError, match='no corrupted condition in common'):
        load_model_set([a, _write_model(tmp_path, 'd', {('clean', 0): 50.0,
                                                        ('haze', 3): 40.0})],
                       common_conditions=True)


def test_condition_sets_named_per_corruption(tmp_path):
    """What a file lacks: severities of every corruption, or per corruption."""
    full = {('clean', 0): 60.0, ('cloud', 1): 50.0, ('cloud', 2): 45.0, ('haze', 1): 55.0,
            ('haze', 2): 52.0}
    a = _write_model(tmp_path, 'a', full, model='A')
    b = _write_model(tmp_path, 'b', {k: v for k, v in full.items() if k[1] != 2}, model='B')
    c = _write_model(tmp_path, 'c', {k: v for k, v in full.items() if k != ('haze', 2)},
                     model='C')
    d = _write_model(tmp_path, 'd', {k: v for k, v in full.items() if k[0] != 'haze'},
                     model='D')
    with pytest.raises(ValueError) as refused:
        load_model_set([a, b, c, d])
    message = str(refused.value)
    assert f'{b} (evaluated at severities 1) lacks severities 2 of every corruption' in message
    assert f'{c} (evaluated at severities 1, 2) lacks haze at severities 2' in message
    assert f'{d} (evaluated at severities 1, 2) lacks haze (not evaluated)' in message
    # a corruption with fewer severities than the others is said in the notes
    with pytest.warns(UserWarning, match=r'different severities \(cloud: 1, 2; haze: 1\)'):
        model_set = load_model_set([a, c], common_conditions=True)
    assert model_set.corruption_mean(AVG).tolist() == [(47.5 + 55.0) / 2] * 2


# --------------------------------------------------------------------------- fits
def test_fit_matches_polyfit():
    rng = np.random.default_rng(3)
    x = rng.uniform(40, 80, size=9)
    y = 0.7 * x - 4 + rng.normal(0, 2, size=9)
    fit = effective_robustness_fit(x, y, models=[f'm{i}' for i in range(9)], name='avg',
                                   n_bootstrap=0)
    slope, intercept = np.polyfit(x, y, 1)
    assert fit.slope == pytest.approx(slope) and fit.intercept == pytest.approx(intercept)
    np.testing.assert_allclose(fit.residuals, y - np.polyval([slope, intercept], x),
                               atol=1e-9)
    assert fit.r_squared == pytest.approx(np.corrcoef(x, y)[0, 1] ** 2)
    assert fit.band_low is None and fit.n_valid == 0


def test_fit_recovers_exact_line():
    x = np.array([35.0, 48.0, 52.5, 61.0, 77.0])
    y = 0.8 * x - 5.0
    slope, intercept, r_squared = fit_line(x, y)
    assert (slope, intercept, r_squared) == pytest.approx((0.8, -5.0, 1.0))
    fit = effective_robustness_fit(x, y, models=list('abcde'), name='cloud', n_bootstrap=50)
    np.testing.assert_allclose(fit.residuals, 0.0, atol=1e-9)
    np.testing.assert_allclose(fit.band_low, fit.line, atol=1e-9)
    np.testing.assert_allclose(fit.band_high, fit.line, atol=1e-9)


def test_logit_fit_matches_polyfit_in_logit_space():
    x = np.array([30.0, 45.0, 58.0, 66.0, 81.0])
    y = np.array([12.0, 25.0, 30.0, 41.0, 60.0])
    fit = effective_robustness_fit(x, y, models=list('abcde'), name='avg', space='logit',
                                   n_bootstrap=0)
    lx, ly = special.logit(x / 100), special.logit(y / 100)
    slope, intercept = np.polyfit(lx, ly, 1)
    assert fit.slope == pytest.approx(slope) and fit.intercept == pytest.approx(intercept)
    predicted = 100 * special.expit(slope * lx + intercept)
    np.testing.assert_allclose(fit.residuals, y - predicted, atol=1e-9)
    with pytest.raises(ValueError, match='fit space'):
        fit_line(x, y, space='probit')


def test_bootstrap_is_deterministic_and_reproducible():
    rng = np.random.default_rng(11)
    x = rng.uniform(40, 80, size=10)
    y = 0.9 * x - 12 + rng.normal(0, 1.5, size=10)
    models = [f'm{i}' for i in range(10)]
    fit = effective_robustness_fit(x, y, models=models, name='avg', n_bootstrap=300, seed=7)
    again = effective_robustness_fit(x, y, models=models, name='avg', n_bootstrap=300, seed=7)
    other = effective_robustness_fit(x, y, models=models, name='avg', n_bootstrap=300, seed=8)
    for key in ('band_low', 'band_high', 'residual_low', 'residual_high'):
        np.testing.assert_array_equal(getattr(fit, key), getattr(again, key))
    assert not np.array_equal(fit.band_low, other.band_low)
    # the band contains the fitted line; each residual interval is ordered
    assert np.all(fit.band_low <= fit.line + 1e-9) and np.all(fit.line <= fit.band_high + 1e-9)
    assert np.all(fit.residual_low <= fit.residual_high)
    # reproduce: same generator draws, np.polyfit per resample, percentiles
    index = np.random.default_rng(7).integers(0, 10, size=(300, 10))
    lines, residuals = [], []
    for row in index:
        if np.unique(x[row]).size < 2:
            continue
        slope, intercept = np.polyfit(x[row], y[row], 1)
        lines.append(slope * fit.grid + intercept)
        residuals.append(y - (slope * x + intercept))
    assert fit.n_valid == len(lines) == 300
    np.testing.assert_allclose(fit.band_low, np.percentile(lines, 2.5, axis=0), atol=1e-8)
    np.testing.assert_allclose(fit.band_high, np.percentile(lines, 97.5, axis=0), atol=1e-8)
    np.testing.assert_allclose(fit.residual_low, np.percentile(residuals, 2.5, axis=0),
                               atol=1e-8)


def test_degenerate_resamples_are_skipped():
    """With 3 models, resamples drawing a single model have one ID value."""
    x, y = np.array([50.0, 60.0, 70.0]), np.array([40.0, 47.0, 58.0])
    fit = effective_robustness_fit(x, y, models=list('abc'), name='avg', n_bootstrap=400,
                                   seed=0)
    index = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    expected = sum(np.unique(row).size > 1 for row in index)
    assert fit.n_valid == expected < 400
    with pytest.raises(ValueError, match='same ID'):
        fit_line([50.0, 50.0, 50.0], [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------- model counts
def _sweep_models(root, count, seed=0, prefix='M', folder_prefix='m', shift=0.0):
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        clean = 40.0 + 40.0 * i / max(count - 1, 1) + rng.normal(0, 1)
        conditions = {('clean', 0): (clean + shift, float(rng.uniform(0.02, 0.08)))}
        for name in ('cloud', 'gaussian_noise'):
            for severity in (1, 2):
                conditions[(name, severity)] = (
                    float(np.clip(0.85 * clean - 6 * severity + rng.normal(0, 2), 0, 100)),
                    float(rng.uniform(0.03, 0.12)))
        paths.append(_write_model(root, f'{folder_prefix}{i}', conditions,
                                  model=f'{prefix}{i}'))
    return paths


def test_two_models_warn(tmp_path):
    paths = _sweep_models(tmp_path, 2)
    with pytest.warns(UserWarning) as record:
        comparison = compare_models(paths, n_bootstrap=100, seed=0)
    messages = ' '.join(str(w.message) for w in record)
    assert 'nearly meaningless' in messages and 'every effective robustness' in messages
    for row in comparison.rank.measures['mIoU'].conditions:
        assert abs(row.tau) == pytest.approx(1.0)
    for fit in comparison.fits.values():
        np.testing.assert_allclose(fit.residuals, 0.0, atol=1e-9)


def test_one_model_and_bad_inputs_error(tmp_path):
    paths = _sweep_models(tmp_path, 2)
    with pytest.raises(ValueError, match='at least 2'):
        load_model_set(paths[:1])
    with pytest.raises(ValueError, match='1 names given for 2'):
        load_model_set(paths, names=['only'])
    with pytest.raises(ValueError, match=r"unique.*given more than once: \['same'\]"):
        load_model_set(paths, names=['same', 'same'])
    with pytest.raises(ValueError, match='the same results file is given more than once'):
        load_model_set([paths[0], paths[1], paths[0]])
    det = _write_model(tmp_path, 'det', {('clean', 0): 60.0, ('cloud', 1): 50.0},
                       model='Det', task='detection')
    with pytest.raises(ValueError, match='share one task'):
        load_model_set([paths[0], det])


def test_thirty_models(tmp_path):
    paths = _sweep_models(tmp_path, 30, seed=5)
    comparison = compare_models(paths, n_bootstrap=200, seed=1)
    assert len(comparison.model_set.models) == 30
    assert set(comparison.fits) == {AVG, 'cloud', 'gaussian_noise'}
    fit = comparison.fits[AVG]
    assert fit.n_valid == 200 and fit.residuals.shape == (30, )
    assert np.all(fit.band_low <= fit.line + 1e-9) and np.all(fit.line <= fit.band_high + 1e-9)
    files = write_cross_model(comparison, str(tmp_path / 'out'), plots=False)
    with open(files['model_conditions.csv'], newline='') as handle:
        rows = list(csv.DictReader(handle))
    # 30 models x (clean + 4 conditions + 2 corruption means + avg)
    assert len(rows) == 30 * 8
    clean_ranks = sorted(float(r['mIoU_rank']) for r in rows if r['condition'] == 'clean')
    assert clean_ranks == list(range(1, 31))


# --------------------------------------------------------------------------- names
def test_repeated_provenance_names_are_derived_from_folders(tmp_path):
    conditions = {('clean', 0): 60.0, ('cloud', 1): 50.0}
    paths = [_write_model(tmp_path, osp.join(f's{i}', 'robustness'), conditions, model='M')
             for i in range(3)]
    with pytest.warns(UserWarning, match="model name 'M' repeats in 3 results files; named by "
                      'their paths') as record:
        model_set = load_model_set(paths)
    assert model_set.models == ['M (s0/robustness)', 'M (s1/robustness)',
                                'M (s2/robustness)']
    assert f'M (s1/robustness) = {paths[1]}' in str(record[0].message)
    # the table names its rows by the same rule
    with pytest.warns(UserWarning, match='named by their paths'):
        table = build_comparison(paths)
    assert [r['model'] for r in table.rows] == model_set.models
    # given names win; a name given to one file renames the others of that name only
    named = load_model_set(paths, names=['a', 'b', 'c'])
    assert named.models == ['a', 'b', 'c']
    assert not [n for n in named.notes if 'named by' in n]
    with pytest.warns(UserWarning, match="model name 'M' repeats in 3 results files"):
        partly = load_model_set(paths, names=['M', None, None])
    assert partly.models == ['M', 'M (s1/robustness)', 'M (s2/robustness)']
    # files of one folder are told apart by their file names
    other = tmp_path / 's0' / 'robustness' / 'copy.json'
    other.write_bytes(open(paths[0], 'rb').read())
    with pytest.warns(UserWarning):
        assert load_model_set([paths[0], str(other)]).models == ['M (results.json)',
                                                                  'M (copy.json)']
    # backbones that tell the files apart name them
    for backbone in ('ViT-B', 'ViT-L'):
        write_report(str(tmp_path / backbone), conditions, task='segmentation', plots=False,
                     provenance=make_provenance(model='R', backbone=backbone,
                                                versions=VERSIONS))
    with pytest.warns(UserWarning, match="'R' repeats in 2 results files; named by their "
                      'backbones'):
        assert load_model_set([str(tmp_path / b / 'results.json') for b in
                               ('ViT-B', 'ViT-L')]).models == ['R (ViT-B)', 'R (ViT-L)']
    # shift results are paired by name: their names are never derived
    with pytest.raises(ValueError, match=r"unique among the shift results files; 'M'"):
        load_shift_values(named, paths)


# --------------------------------------------------------------------------- shift
def test_shift_results_paired_by_name(tmp_path):
    paths = _sweep_models(tmp_path / 'id', 4, seed=2)
    # the same models on a shifted dataset, other folders, other order
    shifted = _sweep_models(tmp_path / 'ood', 4, seed=2, folder_prefix='other', shift=-10.0)
    shifted = shifted[::-1]
    comparison = compare_models(paths, shift_paths=shifted, n_bootstrap=50)
    expected = [json.load(open(p))['numbers']['clean'] for p in shifted[::-1]]
    np.testing.assert_allclose(comparison.fits[SHIFT].ood_values, expected)
    slope, intercept = np.polyfit(comparison.model_set.clean(), expected, 1)
    assert comparison.fits[SHIFT].slope == pytest.approx(slope)
    assert comparison.shift_paths['M0'] == shifted[-1]
    model_set = load_model_set(paths)
    with pytest.raises(ValueError, match=r"no shift result for model\(s\) \['M3'\]"):
        load_shift_values(model_set, shifted[1:])
    with pytest.raises(ValueError, match='no shift result'):
        load_shift_values(model_set, shifted, names=['a', 'b', 'c', 'd'])
    with pytest.raises(ValueError, match='one value per model'):
        effective_robustness(model_set, shift_values=[1.0, 2.0])


# --------------------------------------------------------------------------- tool

def test_cli_writes_files(tmp_path, known_sweep):
    shifted = [_write_model(tmp_path / 'shift', f's{i}', {('clean', 0): 30.0 + 8 * i,
                                                          ('cloud', 1): 20.0}, model=name)
               for i, name in enumerate(NAMES)]
    out_dir = tmp_path / 'out'
    result = tool_result('analysis_tools/robustness_compare.py', [*known_sweep,
         '--shift-results', *shifted, '--out-dir', str(out_dir), '--bootstrap', '200',
         '--seed', '3'])
    assert result.returncode == 0, result.stderr[-3000:]
    assert '## Rank stability' in result.stdout and '## Effective robustness' in result.stdout
    for name in CROSS_MODEL_FILES + CROSS_MODEL_PLOTS:
        path = out_dir / name
        assert str(path) in result.stdout
        assert path.stat().st_size > 0
    for name in CROSS_MODEL_PLOTS:
        assert (out_dir / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert not [n for n in os.listdir(out_dir) if n.endswith('.tmp')]
    doc = json.loads((out_dir / 'cross_model.json').read_text(encoding='utf-8'))
    fits = doc['effective_robustness']
    assert set(fits) == {AVG, 'cloud', 'haze', SHIFT}
    assert fits[SHIFT]['models']['Beta']['ood'] == pytest.approx(38.0)
    assert fits[AVG]['n_bootstrap'] == 200 and fits[AVG]['seed'] == 3
    in_process = compare_models(known_sweep, shift_paths=shifted, n_bootstrap=200, seed=3)
    assert fits[AVG]['band_low'] == pytest.approx(list(in_process.fits[AVG].band_low))
    taus = {r['condition']: r['tau'] for r in doc['rank_stability']['mIoU']['conditions']}
    assert taus['cloud@2'] == pytest.approx(-1.0)
    with open(out_dir / 'effective_robustness.csv', newline='') as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 * len(NAMES)


@pytest.mark.parametrize('extra, message', [
    (['--names', 'a'], '--names has 1 names for 4'),
    (['--shift-results', 'missing.json'], 'no such results file'),
    (['--shift-names', 'a'], '--shift-names needs --shift-results'),
])
def test_cli_argument_errors(known_sweep, tmp_path, capsys, extra, message):
    tool = load_tool('analysis_tools/robustness_compare.py')
    with pytest.raises(SystemExit) as exit_info:
        tool.main([*known_sweep, '--out-dir', str(tmp_path), *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_missing_shift_pair_and_single_file(known_sweep, tmp_path, capsys):
    tool = load_tool('analysis_tools/robustness_compare.py')
    shifted = _write_model(tmp_path, 'shift_alpha', {('clean', 0): 30.0, ('cloud', 1): 20.0},
                           model='Alpha')
    assert run_tool(tool.main, [*known_sweep, '--shift-results', shifted, '--out-dir',
                                str(tmp_path), '--no-plots']) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith('error: no shift result for model(s)') and '\n' not in err
    with pytest.raises(SystemExit):
        tool.main([known_sweep[0], '--out-dir', str(tmp_path)])
    assert 'at least 2 results files' in capsys.readouterr().err


# --------------------------------------------------------------------------- both tools

#: Three checkpoints of one config (one provenance model name); the third swept at
#: severities 1, 3, 5 only. Values fall with severity, not linearly, so the mean over
#: 1..5 differs from the mean over 1, 3, 5.
CASE_CURVES = {'cloud': [72.0, 66.0, 55.0, 41.0, 30.0],
               'gaussian_noise': [70.0, 52.0, 35.0, 22.0, 15.0],
               'haze': [76.0, 74.0, 69.0, 60.0, 48.0]}
CASE_RUNS = [('seed0', 0.0, (1, 2, 3, 4, 5)), ('seed1', 1.5, (1, 2, 3, 4, 5)),
             ('seed2', -1.0, (1, 3, 5))]
CASE_NAMES = [f'upernet_r18 ({folder}/robustness)' for folder, _, _ in CASE_RUNS]


def _case_value(name, severity, offset):
    return CASE_CURVES[name][severity - 1] + offset * (1 + severity / 5)


def _reported_case(root):
    paths = []
    for folder, offset, severities in CASE_RUNS:
        conditions = {('clean', 0): 80.0 + offset}
        conditions.update({(name, s): _case_value(name, s, offset)
                           for name in CASE_CURVES for s in severities})
        paths.append(_write_model(root, osp.join(folder, 'robustness'), conditions,
                                  model='upernet_r18'))
    return paths


def _case_expected(severities=(1, 3, 5)):
    """REOBench's Avg and ΔTP of each run over ``severities``, by hand."""
    out = []
    for _, offset, _ in CASE_RUNS:
        means = [sum(_case_value(n, s, offset) for s in severities) / len(severities)
                 for n in CASE_CURVES]
        avg = sum(means) / len(means)
        out.append((avg, 80.0 + offset - avg))
    return out


def test_table_and_comparison_agree_on_the_reported_case(tmp_path, capsys):
    """Three results files, one of other severities, all of one model name: both tools
    refuse them alike by default; restricted to the common conditions both name the rows
    alike and give the same Avg and ΔTP, those of REOBench's formula by hand."""
    paths = _reported_case(tmp_path / 'runs')
    table_tool, compare_tool = load_tool('analysis_tools/robustness_table.py'), load_tool('analysis_tools/robustness_compare.py')

    # the default: one and the same refusal, naming the file and what it lacks
    assert run_tool(table_tool.main, paths) == 2
    table_err = capsys.readouterr().err.strip()
    assert run_tool(compare_tool.main, [*paths, '--out-dir', str(tmp_path / 'refused')]) == 2
    compare_err = capsys.readouterr().err.strip()
    assert table_err == compare_err and '\n' not in table_err
    assert table_err.startswith('error: the results files do not hold the same conditions')
    assert f'{paths[2]} (evaluated at severities 1, 3, 5) lacks severities 2, 4 of every ' \
        'corruption' in table_err
    assert paths[0] not in table_err and '--common-conditions' in table_err
    assert not (tmp_path / 'refused').exists()

    # restricted on request: the table in this process, the comparison in a subprocess
    expected = _case_expected()
    out_md, out_csv = tmp_path / 'table.md', tmp_path / 'table.csv'
    assert run_tool(table_tool.main, [*paths, '--common-conditions', '--out', str(out_md),
                                      '--csv', str(out_csv)]) == 0
    table_err = capsys.readouterr().err
    assert 'named by their paths' in table_err and 'restricted, as asked' in table_err
    with open(out_csv, newline='') as handle:
        table_rows = list(csv.DictReader(handle))
    assert [r['model'] for r in table_rows] == CASE_NAMES
    for row, (avg, delta) in zip(table_rows, expected):
        assert (row['avg'], row['delta_tp']) == (f'{avg:.2f}', f'{delta:.2f}')
    markdown = out_md.read_text(encoding='utf-8')
    assert f'| {CASE_NAMES[1]} | – | **81.50** |' in markdown
    assert f'**{expected[1][0]:.2f}** | **{expected[1][1]:.2f}** |' in markdown
    assert '- restricted, as asked (--common-conditions), to the 10 conditions' in markdown

    out_dir = tmp_path / 'compare'
    result = tool_result('analysis_tools/robustness_compare.py', [*paths,
         '--common-conditions', '--out-dir', str(out_dir), '--bootstrap', '0',
         '--no-plots'])
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'named by their paths' in result.stderr and 'restricted, as asked' in result.stderr
    doc = json.loads((out_dir / 'cross_model.json').read_text(encoding='utf-8'))
    assert [m['name'] for m in doc['models']] == CASE_NAMES
    assert doc['severities'] == [1, 3, 5] and set(doc['dropped']) == set(CASE_NAMES[:2])
    table = build_comparison(paths, common_conditions=True)
    for model, row, (avg, delta) in zip(doc['models'], table.rows, expected):
        # the same numbers, to the last bit, and those of the formula
        assert (model['mIoU']['avg'], model['mIoU']['delta_tp']) == \
            (row['avg'], row['delta_tp'])
        assert row['avg'] == pytest.approx(avg, abs=1e-12)
        assert row['delta_tp'] == pytest.approx(delta, abs=1e-12)
        assert f'| {row["model"]} | {row["clean"]:.2f} | {avg:.2f} | {delta:.2f} |' in \
            result.stdout
    comparison = compare_models(paths, common_conditions=True, n_bootstrap=0)
    assert comparison.model_set.corruption_mean(AVG).tolist() == [r['avg'] for r in table.rows]
    assert comparison.fits[AVG].ood_values.tolist() == [r['avg'] for r in table.rows]

    # without a restriction the numbers are each file's own
    with pytest.warns(UserWarning, match='named by their paths'):
        model_set = load_model_set(paths[:2])
    own = comparison_table(model_set)
    for row, path, (avg, delta) in zip(own.rows, paths, _case_expected((1, 2, 3, 4, 5))):
        summary = json.load(open(path))['numbers']
        assert (row['avg'], row['delta_tp']) == (summary['avg'], summary['delta_tp'])
        assert row['avg'] == pytest.approx(avg, abs=1e-12)


def test_models_with_the_same_clean_value_are_compared_without_the_fit(tmp_path, capsys):
    """fp32 against bf16, a fix that leaves clean unchanged: every other analysis runs, the
    effective-robustness fit (a line through one ID value) is skipped with a note."""
    from reobench_cli import run_tool
    paths = [_write_model(tmp_path, f'm{i}', {('clean', 0): 61.25, ('cloud', 1): 40.0 + i,
                                              ('cloud', 2): 30.0 + 2 * i},
                          model=f'M{i}') for i in range(3)]
    comparison = compare_models(paths, n_bootstrap=50, seed=0)
    assert comparison.fits == {} and any('every model has the same clean mIoU (61.25): no '
                                         'effective-robustness line' in n
                                         for n in comparison.notes)
    tool = load_tool('analysis_tools/robustness_compare.py')
    out_dir = tmp_path / 'out'
    assert run_tool(tool.main, [*paths, '--out-dir', str(out_dir), '--bootstrap', '50']) == 0
    text = (out_dir / 'cross_model.md').read_text(encoding='utf-8')
    assert 'Not fitted: every model has the same clean mIoU' in text
    assert '## Rank stability' in text and not (out_dir / 'effective_robustness.png').exists()
    assert (out_dir / 'effective_robustness.csv').read_text().splitlines() == [
        'fit,space,model,id,ood,predicted_ood,effective_robustness,ci_low,ci_high']
