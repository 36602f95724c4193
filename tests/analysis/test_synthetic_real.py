"""Do corruptions predict real shifts? The drops read from the shift blocks and from
separate shift results, Spearman and Kendall against scipy, the bootstrap over models
re-implemented with the same draws (skipped resamples counted), the regression on ΔTP
against scipy.stats.linregress, the table, CSV and plots of the comparison, edge cases,
and one real model set: tiny demo UperNets swept on the demo data with a corruption and
the shifted demo set, every number of the group and synthetic-vs-real tables recomputed
from their results.json files."""
import csv
import json
import os.path as osp

import numpy as np
import pytest
from scipy import stats

import reobench_mm  # noqa: F401
from reobench_mm.analysis.compare import compare_models, write_cross_model
from reobench_mm.analysis.model_set import load_model_set
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import AVG, SHIFT, ConditionResult
from reobench_mm.analysis.shift_table import shift_block
from reobench_mm.analysis.synthetic_real import (bootstrap_rank_correlations, shift_drops,
                                                 synthetic_drops, synthetic_vs_real)
from reobench_mm.evaluation.keys import ECE_KEY

from helpers import SEG_DEMO_CONFIG, load_tool
from reobench_cli import run_tool

VERSIONS = {'numpy': '0'}
CORRUPTIONS = ['cloud', 'haze', 'gaussian_noise']
SEVERITIES = [1, 2]
MODELS = [f'm{i}' for i in range(7)]


def _write(root, model, table, shifts=(), task='segmentation'):
    """``results.json`` of ``table`` (``{(corruption, severity): value}``) with the shift
    sets ``[(name, shift_type, condition, OOD value)]`` as the loops write them."""
    results = {c: ConditionResult(v, per_class=None, extra={}) for c, v in table.items()}
    block = None
    if shifts:
        rows = [dict(name=n, shift_type=t, condition=c,
                     key=f'shift/{n}' if c == 'clean' else f'shift/{n}/{c}', value=v,
                     images=3, stats=None) for n, t, c, v in shifts]
        block = shift_block(rows, id_value=table[('clean', 0)], metric='mIoU')
    out = osp.join(str(root), model)
    write_report(out, results, protocol='reobench', task=task, plots=False,
                 blocks=dict(shifts=block),
                 provenance=make_provenance(model=model, versions=VERSIONS))
    return osp.join(out, 'results.json')


def _tables(seed=0, models=MODELS):
    rng = np.random.default_rng(seed)
    out = {}
    for model in models:
        clean = rng.uniform(55, 80)
        table = {('clean', 0): clean}
        table.update({(c, s): clean - rng.uniform(0.5, 4) * s * (k + 1)
                      for k, c in enumerate(CORRUPTIONS) for s in SEVERITIES})
        out[model] = table
    return out


@pytest.fixture(scope='module')
def shifted(tmp_path_factory):
    """7 models; shift sets 'vaihingen' (geographic) and 'rural' (with a corruption on
    top, which is not a real shift), and 'dota' in all but one model."""
    root = tmp_path_factory.mktemp('synthetic_real')
    rng = np.random.default_rng(1)
    tables = _tables()
    ood, paths = {}, []
    for i, model in enumerate(MODELS):
        clean = tables[model][('clean', 0)]
        ood[model] = {'vaihingen': clean - rng.uniform(5, 25), 'rural': clean - rng.uniform(0, 15),
                      'dota': clean - 3.0}
        sets = [('vaihingen', 'geographic', 'clean', ood[model]['vaihingen']),
                ('rural', 'sensor', 'clean', ood[model]['rural']),
                ('rural', 'sensor', 'haze@3', ood[model]['rural'] - 9.0)]
        if i:
            sets.append(('dota', 'source', 'clean', ood[model]['dota']))
        paths.append(_write(root, model, tables[model], sets))
    return root, tables, ood, paths


def _synthetic(tables):
    """The synthetic drops computed directly."""
    out = {}
    for c in CORRUPTIONS:
        out[c] = np.array([t[('clean', 0)] - np.mean([t[(c, s)] for s in SEVERITIES])
                           for t in tables.values()])
    out[AVG] = np.array([t[('clean', 0)] - np.mean([np.mean([t[(c, s)] for s in SEVERITIES])
                                                      for c in CORRUPTIONS])
                         for t in tables.values()])
    return out


def _bootstrap_by_loop(x, y, resamples, seed, level=0.95):
    """The bootstrap re-implemented: the same model draws, scipy per resample."""
    index = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    rhos, taus = [], []
    for row in index:
        xb, yb = x[row], y[row]
        if len(set(row)) < 3 or np.ptp(xb) == 0 or np.ptp(yb) == 0:
            continue
        rhos.append(stats.spearmanr(xb, yb).statistic)
        taus.append(stats.kendalltau(xb, yb).statistic)
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    return np.percentile(rhos, q), np.percentile(taus, q), len(rhos)


def test_the_drops_are_read_from_the_shift_blocks(shifted):
    _, tables, ood, paths = shifted
    model_set = load_model_set(paths)
    drops, types, notes = shift_drops(model_set)
    assert list(drops) == ['vaihingen', 'rural']  # dota is not in every model; haze@3 on top
    assert types == {'vaihingen': 'geographic', 'rural': 'sensor'}
    assert 'dota' in notes[0]
    for name in drops:
        np.testing.assert_allclose(drops[name], [tables[m][('clean', 0)] - ood[m][name]
                                                 for m in MODELS], rtol=1e-12)
    for key, values in synthetic_drops(model_set).items():
        np.testing.assert_allclose(values, _synthetic(tables)[key], rtol=1e-12)


def test_correlations_intervals_and_regressions_against_scipy(shifted):
    _, tables, ood, paths = shifted
    result = synthetic_vs_real(load_model_set(paths), resamples=300, level=0.9, seed=3)
    synthetic = _synthetic(tables)
    assert list(result.predictors) == ['cloud', 'gaussian_noise', 'haze', AVG]  # table order
    for p, x in synthetic.items():
        for s in ('vaihingen', 'rural'):
            y = np.array([tables[m][('clean', 0)] - ood[m][s] for m in MODELS])
            rho, tau = result.spearman[p, s], result.kendall[p, s]
            reference = stats.spearmanr(x, y)
            assert rho.statistic == pytest.approx(reference.statistic)
            assert rho.p_value == pytest.approx(reference.pvalue)
            reference = stats.kendalltau(x, y)
            assert tau.statistic == pytest.approx(reference.statistic)
            assert tau.p_value == pytest.approx(reference.pvalue)
            rho_ci, tau_ci, used = _bootstrap_by_loop(x, y, 300, 3, level=0.9)
            assert rho.used == tau.used == used <= 300
            np.testing.assert_allclose(rho.interval, rho_ci, rtol=1e-10)
            np.testing.assert_allclose(tau.interval, tau_ci, rtol=1e-10)
    for s in ('vaihingen', 'rural'):
        y = [tables[m][('clean', 0)] - ood[m][s] for m in MODELS]
        fit = stats.linregress(synthetic[AVG], y)
        r = result.regressions[s]
        assert (r.slope, r.intercept, r.r_squared, r.p_value, r.stderr) == pytest.approx(
            (fit.slope, fit.intercept, fit.rvalue ** 2, fit.pvalue, fit.stderr))


def test_the_vectorised_resample_statistics_equal_scipy_with_ties():
    x = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 4.0])
    y = np.array([1.0, 1.0, 2.0, 3.0, 3.0, 0.5])
    index = np.random.default_rng(0).integers(0, 6, size=(400, 6))
    rho, tau, usable = bootstrap_rank_correlations(x, y, index)
    for b, row in enumerate(index):
        ok = len(set(row)) >= 3 and np.ptp(x[row]) > 0 and np.ptp(y[row]) > 0
        assert usable[b] == ok
        if ok:
            assert rho[b] == pytest.approx(stats.spearmanr(x[row], y[row]).statistic)
            assert tau[b] == pytest.approx(stats.kendalltau(x[row], y[row]).statistic)
        else:
            assert np.isnan(rho[b]) and np.isnan(tau[b])


def test_separate_shift_results_and_edge_cases(tmp_path):
    tables = _tables(seed=5, models=MODELS[:4])
    paths = [_write(tmp_path / 'id', m, t) for m, t in tables.items()]
    shifted = {m: t[('clean', 0)] - 2.0 * (i + 1) ** 1.5 for i, (m, t) in enumerate(tables.items())}
    shift_paths = [_write(tmp_path / 'ood', m, {('clean', 0): v, ('haze', 1): v - 1})
                   for m, v in shifted.items()]
    comparison = compare_models(paths, shift_paths=shift_paths, n_bootstrap=50, paired=False)
    result = comparison.synthetic_real
    # 4 models: resamples of fewer than 3 distinct models are skipped and counted
    _, _, used = _bootstrap_by_loop(_synthetic(tables)['haze'], result.shifts[SHIFT], 50, 0)
    assert result.spearman['haze', SHIFT].used == used < 50
    assert list(result.shifts) == [SHIFT]
    np.testing.assert_allclose(result.shifts[SHIFT], [tables[m][('clean', 0)] - shifted[m]
                                                      for m in tables], rtol=1e-12)
    assert result.regressions[SHIFT].slope == pytest.approx(stats.linregress(
        _synthetic(tables)[AVG], result.shifts[SHIFT]).slope)
    # no real shift: no section
    assert compare_models(paths, n_bootstrap=10, paired=False).synthetic_real is None
    # two models: notes, undefined regression, no usable resample
    two = synthetic_vs_real(load_model_set(paths[:2]), np.array([50.0, 40.0]), resamples=20)
    assert 'only 2 models' in two.notes[0]
    assert np.isnan(two.regressions[SHIFT].slope)
    assert two.spearman[AVG, SHIFT].used == 0 and two.spearman[AVG, SHIFT].interval is None
    # the same drop for every model: undefined correlations, a note
    same = synthetic_vs_real(load_model_set(paths), load_model_set(paths).clean() - 5.0,
                             resamples=20)
    assert np.isnan(same.spearman['cloud', SHIFT].statistic)
    assert any('same drop for every model' in n for n in same.notes)
    with pytest.raises(ValueError, match='resamples must be'):
        synthetic_vs_real(load_model_set(paths), resamples=-1)


def test_the_comparison_writes_the_table_csv_and_plots(shifted, tmp_path):
    _, tables, ood, paths = shifted
    comparison = compare_models(paths, n_bootstrap=100, seed=2, paired=False)
    files = write_cross_model(comparison, str(tmp_path / 'out'))
    for name in ('synthetic_vs_real.csv', 'synthetic_vs_real.png',
                 'shift_drop_vs_delta_tp.png'):
        assert osp.isfile(files[name])
    with open(files['synthetic_vs_real.csv']) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 * 2
    synthetic = _synthetic(tables)
    for r in rows:
        x = synthetic[r['predictor']]
        y = np.array([tables[m][('clean', 0)] - ood[m][r['shift']] for m in MODELS])
        assert float(r['spearman']) == pytest.approx(stats.spearmanr(x, y).statistic)
        assert float(r['kendall_p']) == pytest.approx(stats.kendalltau(x, y).pvalue)
        rho_ci, _, used = _bootstrap_by_loop(x, y, 100, 2)
        assert [float(r['spearman_low']), float(r['spearman_high'])] == pytest.approx(rho_ci)
        assert int(r['resamples_used']) == used and r['resamples'] == '100'
        if r['predictor'] == AVG:
            assert float(r['r_squared']) == pytest.approx(stats.linregress(x, y).rvalue ** 2)
        else:
            assert r['slope'] == ''
    text = open(files['cross_model.md']).read()
    assert '## Do corruptions predict real shifts?' in text
    assert '| Avg (ΔTP) |' in text and 'vaihingen (geographic)' in text
    doc = json.load(open(files['cross_model.json']))['synthetic_vs_real']
    assert doc['real_drops']['rural']['m0'] == pytest.approx(
        tables['m0'][('clean', 0)] - ood['m0']['rural'])


# --------------------------------------------------------------------- a real model set
def _seeded_checkpoint(path, seed):
    """A checkpoint of the demo UperNet freshly initialised under ``seed``."""
    import torch
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    from reobench_mm.registry import MODELS as REGISTRY
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    torch.manual_seed(seed)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = REGISTRY.build(cfg.model)
    model.init_weights()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return path


def _sweep(tmp_path, demo_data, seed):
    from mmengine.config import Config
    from mmengine.runner import Runner
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path / f'seed{seed}')
    cfg.log_level = 'WARNING'
    cfg.test_dataloader.dataset.data_root = osp.join(demo_data, 'potsdam')
    cfg.test_dataloader.num_workers = 0
    cfg.test_dataloader.persistent_workers = False
    cfg.custom_hooks = []
    cfg.load_from = _seeded_checkpoint(str(tmp_path / f'model{seed}.pth'), seed)
    shifted = dict(type='PotsdamDataset', data_root=osp.join(demo_data, 'potsdam_shifted'),
                   data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'))
    cfg.test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[3],
                        plots=False, calibration=True,
                        shifts=dict(potsdam_shifted=dict(shift_type='sensor', dataset=shifted)))
    Runner.from_cfg(cfg).test()
    return osp.join(cfg.work_dir, 'results.json')


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_a_real_model_set_against_its_results_files(demo_data, tmp_path):
    paths = [_sweep(tmp_path, demo_data, seed) for seed in range(4)]
    names = ['a', 'b', 'c', 'd']
    groups = {'init': {'a': 'even', 'b': 'odd', 'c': 'even', 'd': 'odd'}}
    comparison = compare_models(paths, names=names, groups=groups, n_bootstrap=200, seed=1,
                                paired=False)
    files = write_cross_model(comparison, str(tmp_path / 'out'))
    # recomputed from the files
    clean, haze, ece_clean, ece_haze, drop = [], [], [], [], []
    for path in paths:
        numbers = json.load(open(path))['numbers']
        rows = {r['condition']: r for r in numbers['conditions']}
        clean.append(rows['clean']['value'])
        haze.append(rows['haze@3']['value'])
        ece_clean.append(rows['clean']['extra'][ECE_KEY])
        ece_haze.append(rows['haze@3']['extra'][ECE_KEY])
        (row, ) = [s for s in numbers['shifts']['sets'] if s['condition'] == 'clean']
        assert row['name'] == 'potsdam_shifted'
        drop.append(rows['clean']['value'] - row['ood'])
    clean, haze, drop = np.array(clean), np.array(haze), np.array(drop)
    ece_clean, ece_haze = np.array(ece_clean), np.array(ece_haze)
    numbers = {'clean': clean, 'haze@mean': haze, 'avg': haze, 'delta_tp': clean - haze,
               'relative_drop': (clean - haze) / clean,
               'haze@relative_drop': (clean - haze) / clean,
               f'{ECE_KEY}@clean': ece_clean, f'{ECE_KEY}@avg': ece_haze,
               f'{ECE_KEY}@3/clean': ece_haze / ece_clean}
    with open(files['groups.csv']) as handle:
        group_rows = list(csv.DictReader(handle))
    assert {r['number'] for r in group_rows} == set(numbers)
    even, odd = [0, 2], [1, 3]
    for r in group_rows:
        values = numbers[r['number']]
        if r['kind'] == 'mean':
            members = even if r['group'] == 'even' else odd
            assert float(r['value']) == pytest.approx(np.mean(values[members]), rel=1e-9)
        else:
            reference = stats.mannwhitneyu(values[even], values[odd], alternative='two-sided')
            assert (float(r['value']), float(r['p_value'])) == pytest.approx(
                (reference.statistic, reference.pvalue))
    with open(files['synthetic_vs_real.csv']) as handle:
        real_rows = list(csv.DictReader(handle))
    assert [(r['predictor'], r['shift']) for r in real_rows] == [
        ('haze', 'potsdam_shifted'), (AVG, 'potsdam_shifted')]
    for r in real_rows:
        x = clean - haze
        assert float(r['spearman']) == pytest.approx(stats.spearmanr(x, drop).statistic)
        assert float(r['kendall']) == pytest.approx(stats.kendalltau(x, drop).statistic)
        rho_ci, tau_ci, used = _bootstrap_by_loop(x, drop, 200, 1)
        assert int(r['resamples_used']) == used
        assert [float(r['kendall_low']), float(r['kendall_high'])] == pytest.approx(tau_ci)
        assert [float(r['spearman_low']), float(r['spearman_high'])] == pytest.approx(rho_ci)
    fit = stats.linregress(clean - haze, drop)
    assert float(real_rows[1]['slope']) == pytest.approx(fit.slope)
    assert float(real_rows[1]['regression_p']) == pytest.approx(fit.pvalue)
    # the command line (in this process) gives the same tables
    out = tmp_path / 'cli'
    tool = load_tool('analysis_tools/robustness_compare.py')
    assert run_tool(tool.main, [*paths, '--names', *names, '--group',
                                'init:a=even,b=odd,c=even,d=odd', '--bootstrap', '200',
                                '--seed', '1', '--no-paired', '--no-plots', '--out-dir',
                                str(out)]) == 0
    assert open(out / 'groups.csv').read() == open(files['groups.csv']).read()
    assert open(out / 'synthetic_vs_real.csv').read() == \
        open(files['synthetic_vs_real.csv']).read()
