"""The mechanism tests of the calibration study (reobench_mm.analysis.mechanisms,
mechanism_report, mechanism_plots, tools/analysis_tools/mechanism_tests.py) on drift files
written here: B1–B3 and the clean participation ratio against scipy.stats.mannwhitneyu on
the same numbers, CKA against severity against numpy, the refusals; the split-half cosine
floor against numpy; the ECE ratio per corruption and severity and the group means per
cell (reobench_mm.analysis.group_cells) against numpy on results written here; the analytic
Spearman p beside the permutation p against scipy.stats.spearmanr."""
import csv
import json
import math
import os.path as osp

import numpy as np
import pytest
import torch
from scipy import stats

import reobench_mm  # noqa: F401
from reobench_mm.analysis.compare import compare_models, write_cross_model
from reobench_mm.analysis.group_cells import ECE_RATIO_KEY, ece_ratio, group_cells
from reobench_mm.analysis.groups import (analyze_groups, cka_ece_correlation,
                                         spearman_permutation_test)
from reobench_mm.analysis.mechanism_plots import CKA_PLOT, PR_PLOT
from reobench_mm.analysis.mechanism_report import mechanism_csv_rows, write_mechanism_tests
from reobench_mm.analysis.mechanisms import (mann_whitney, mann_whitney_method,
                                             mechanism_tests)
from reobench_mm.analysis.model_set import load_model_set
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.evaluation.functional.drift_accumulators import (DriftAccumulator,
                                                                  SampleDriftAccumulator)
from reobench_mm.evaluation.functional.representation import split_half_cosine
from reobench_mm.evaluation.keys import ECE_KEY

from figure_checks import checking_saved_figures
from helpers import tool_result

#: drift-file order; the first model's group (EO) is the first group
MODELS = ['SatMAE', 'ViT-IN', 'ScaleMAE', 'CLIP', 'CROMA', 'DINO']
DOMAIN = {'SatMAE': 'EO', 'ViT-IN': 'natural', 'ScaleMAE': 'EO', 'CLIP': 'natural',
          'CROMA': 'EO', 'DINO': 'natural'}
CORRUPTIONS = ['cloud', 'haze']
SEVERITIES = [1, 3, 5]
CONDITIONS = [f'{c}@{s}' for c in CORRUPTIONS for s in SEVERITIES]
FINAL = 'backbone.layer4'
SPEC = 'domain:' + ','.join(f'{m}={g}' for m, g in DOMAIN.items())
TOOL = 'analysis_tools/mechanism_tests.py'


# --------------------------------------------------------------------- synthetic files
def _numbers(seed=0):
    """Per model and condition the final block's numbers, drawn here."""
    rng = np.random.default_rng(seed)
    out = {}
    for m in MODELS:
        eo = DOMAIN[m] == 'EO'
        table = {'floor': float(rng.uniform(-0.1, 0.1)), 'cosine_floor': float(rng.uniform(
            0.5, 0.9)), 'pr_clean': float(rng.uniform(1.5, 4.0) + (1.0 if eo else 0.0))}
        for key in CONDITIONS:
            s = int(key.split('@')[1])
            table[key] = dict(cka=float(rng.uniform(0.4, 0.9) - 0.05 * s + (0.1 if eo else 0)),
                              cosine=float(rng.uniform(0.6, 0.99)),
                              rho=float(rng.uniform(-0.6, 0.4)),
                              fraction=float(rng.uniform(0.0, 0.3)))
        out[m] = table
    return out


def _document(values, sha=None, coupled=True, undefined=(), cosine_floor=True):
    """A representation_drift.json of one model (two blocks, clean and every condition);
    ``undefined``: conditions whose drift–confidence rho is null."""
    def block(cka, cosine):
        cell = {'cka': cka, 'cka_floor': values['floor'], 'cosine': cosine,
                'pr_clean': values['pr_clean'], 'pr_corrupted': 1.2}
        if cosine_floor:
            cell['cosine_floor'] = values['cosine_floor']
        return cell

    def coupling(rho, fraction):
        return {'spearman_drift_confidence': {'rho': rho, 'p_value': None if rho is None
                                              else 0.5, 'n': 12, 'note': None},
                'overconfident_drift_fraction': fraction} if coupled else None

    conditions = [{'condition': 'clean', 'corruption': 'clean', 'severity': 0,
                   'blocks': {'backbone.layer2': block(1.0, 1.0), FINAL: block(1.0, 1.0)},
                   'drift_confidence': coupling(None, 0.0)}]
    for key in CONDITIONS:
        c, s = key.split('@')
        v = values[key]
        conditions.append({'condition': key, 'corruption': c, 'severity': int(s),
                           'blocks': {'backbone.layer2': block(0.99, 0.99),
                                      FINAL: block(v['cka'], v['cosine'])},
                           'drift_confidence': coupling(
                               None if key in undefined else v['rho'], v['fraction'])})
    return {'format': 'reobench_mm.representation_drift/3',
            'blocks': [{'name': 'backbone.layer2'}, {'name': FINAL}],
            'settings': {'protocol': 'reobench', 'representation': 'sample',
                         'pr_convention': 'raw'},
            'conditions': conditions, 'provenance': {'checkpoint_sha256': sha}}


def _write_drift(root, values, **options):
    """``{model: path}``, each file in a folder named after its model."""
    paths = {}
    for m in MODELS:
        path = root / m / 'representation_drift.json'
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_document(values[m], sha=f'sha-{m}',
                                             **options.get(m, {}))))
        paths[m] = str(path)
    return paths


def _ece_values(seed=1):
    """Per model ``{(corruption, severity): (mIoU, ECE)}`` drawn here."""
    rng = np.random.default_rng(seed)
    out = {}
    for m in MODELS:
        clean, ece = rng.uniform(50, 80), rng.uniform(0.02, 0.06)
        table = {('clean', 0): (clean, ece)}
        for c in CORRUPTIONS:
            for s in SEVERITIES:
                table[(c, s)] = (clean - rng.uniform(1, 5) * s, ece + rng.uniform(0, 0.02) * s)
        out[m] = table
    return out


def _write_results(root, table, model):
    results = {c: ConditionResult(v, per_class=None, extra={ECE_KEY: e})
               for c, (v, e) in table.items()}
    out = osp.join(str(root), 'results', model)
    write_report(out, results, protocol='reobench', task='segmentation', plots=False,
                 provenance=make_provenance(model=model, versions={'numpy': '0'},
                                            checkpoint_sha256=f'sha-{model}'))
    return osp.join(out, 'results.json')


@pytest.fixture(scope='module')
def drift(tmp_path_factory):
    root = tmp_path_factory.mktemp('mechanisms')
    values = _numbers()
    return root, values, _write_drift(root, values)


@pytest.fixture(scope='module')
def results(drift):
    root = drift[0]
    values = _ece_values()
    return values, [_write_results(root, values[m], m) for m in MODELS]


def _split(per_model):
    eo = [per_model[m] for m in MODELS if DOMAIN[m] == 'EO']
    natural = [per_model[m] for m in MODELS if DOMAIN[m] == 'natural']
    return np.array(eo), np.array(natural)


# --------------------------------------------------------------------- B1–B3
def test_b1_to_b3_equal_scipy_on_the_same_numbers(drift):
    _, values, paths = drift
    result = mechanism_tests(paths, {'domain': DOMAIN, 'size': {m: 'x' for m in MODELS}})
    assert result.labels == ['EO', 'natural'] and result.column == 'domain'
    assert result.members['EO'] == ['SatMAE', 'ScaleMAE', 'CROMA']
    direct = {
        'head_cka': {m: np.mean([values[m][k]['cka'] for k in CONDITIONS]) for m in MODELS},
        'drift_confidence_rho': {m: np.mean([values[m][k]['rho'] for k in CONDITIONS])
                                 for m in MODELS},
        'overconfident_fraction': {m: np.mean([values[m][k]['fraction'] for k in CONDITIONS])
                                   for m in MODELS},
        'pr_clean': {m: values[m]['pr_clean'] for m in MODELS}}
    for key, per_model in direct.items():
        np.testing.assert_allclose(result.values[key], [per_model[m] for m in MODELS],
                                   rtol=1e-12, err_msg=key)
        eo, natural = _split(per_model)
        reference = stats.mannwhitneyu(eo, natural, alternative='two-sided')  # 'auto'
        exact = stats.mannwhitneyu(eo, natural, alternative='two-sided', method='exact')
        t = result.test(key)
        assert (t.first, t.second, t.n_first, t.n_second) == ('EO', 'natural', 3, 3)
        assert t.u == reference.statistic == exact.statistic
        assert t.p_value == pytest.approx(reference.pvalue, rel=1e-12)
        assert t.p_value == pytest.approx(exact.pvalue, rel=1e-12)
        assert t.method == 'exact'  # 3 + 3 models, no ties
        assert t.mean_first == pytest.approx(np.mean(eo)) and \
            t.mean_second == pytest.approx(np.mean(natural))
    assert result.test('head_cka').conditions == CONDITIONS
    # the floors and the cosine, per model
    np.testing.assert_allclose(result.values['cka_floor'], [values[m]['floor'] for m in MODELS])
    np.testing.assert_allclose(result.values['cosine_floor'],
                               [values[m]['cosine_floor'] for m in MODELS])
    np.testing.assert_allclose(result.values['head_cosine'], [np.mean(
        [values[m][k]['cosine'] for k in CONDITIONS]) for m in MODELS])


def test_cka_against_severity_by_group(drift):
    _, values, paths = drift
    result = mechanism_tests(paths, {'domain': DOMAIN})
    assert result.curve_severities == [0, 1, 3, 5]
    for label in ('EO', 'natural'):
        members = [m for m in MODELS if DOMAIN[m] == label]
        per_model = np.array([[1.0] + [np.mean([values[m][f'{c}@{s}']['cka']
                                                for c in CORRUPTIONS]) for s in SEVERITIES]
                              for m in members])
        mean, spread = result.curve_by_group(label)
        np.testing.assert_allclose(mean, per_model.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(spread, per_model.std(axis=0, ddof=1), rtol=1e-12,
                                   atol=1e-15)


def test_severities_and_undefined_values(drift, tmp_path):
    _, values, paths = drift
    at5 = mechanism_tests(paths, {'domain': DOMAIN}, severities=[5])
    assert at5.test('head_cka').conditions == ['cloud@5', 'haze@5']
    per_model = {m: np.mean([values[m][k]['cka'] for k in ('cloud@5', 'haze@5')])
                 for m in MODELS}
    reference = stats.mannwhitneyu(*_split(per_model), alternative='two-sided')
    assert at5.test('head_cka').p_value == pytest.approx(reference.pvalue)
    assert at5.curve_severities == [0, 1, 3, 5]  # the curve keeps every severity
    # one model's rho undefined in haze@1: that condition leaves B2 for every model
    holes = _write_drift(tmp_path / 'holes', values, CLIP={'undefined': ('haze@1',)})
    result = mechanism_tests(holes, {'domain': DOMAIN})
    used = [k for k in CONDITIONS if k != 'haze@1']
    assert result.test('drift_confidence_rho').conditions == used
    assert result.test('overconfident_fraction').conditions == CONDITIONS
    np.testing.assert_allclose(result.values['drift_confidence_rho'], [
        np.mean([values[m][k]['rho'] for k in used]) for m in MODELS])
    assert any('haze@1' in n for n in result.notes)
    # a file without the coupling (a detector): B2 and B3 not tested, B1 still
    plain = _write_drift(tmp_path / 'plain', values, CROMA={'coupled': False,
                                                              'cosine_floor': False})
    result = mechanism_tests(plain, {'domain': DOMAIN})
    for key in ('drift_confidence_rho', 'overconfident_fraction'):
        t = result.test(key)
        assert t.method is None and math.isnan(t.p_value) and t.conditions == []
    assert result.test('head_cka').method == 'exact'
    assert any('cosine_floor' in n for n in result.notes)
    assert math.isnan(result.values['cosine_floor'][MODELS.index('CROMA')])


def test_the_mann_whitney_method_is_scipys_choice():
    rng = np.random.default_rng(3)
    cases = [(rng.normal(size=3), rng.normal(size=4), 'exact'),
             ([0.1, 0.2, 0.3], [0.2, 0.5, 0.6], 'asymptotic'),       # a tie
             (rng.normal(size=9), rng.normal(size=8), 'exact'),      # one group of 8
             (rng.normal(size=9), rng.normal(size=10), 'asymptotic')]
    for a, b, method in cases:
        assert mann_whitney_method(a, b) == method
        u, p, used = mann_whitney(a, b)
        reference = stats.mannwhitneyu(a, b, alternative='two-sided', method=method)
        auto = stats.mannwhitneyu(a, b, alternative='two-sided')
        assert used == method and u == reference.statistic == auto.statistic
        assert p == pytest.approx(reference.pvalue, rel=1e-12) == auto.pvalue


@pytest.mark.parametrize('groupings, column, message', [
    ({'domain': {**DOMAIN, 'Prithvi': 'EO'}}, 'domain', r"unknown model\(s\) \['Prithvi'\]"),
    ({'domain': {m: DOMAIN[m] for m in MODELS[:5]}}, 'domain', r"no group to model\(s\)"),
    ({'domain': {**DOMAIN, 'CROMA': 'natural', 'ScaleMAE': 'natural'}}, 'domain',
     r"group 'EO' of column 'domain' has 1 model\(s\) \['SatMAE'\]"),
    ({'domain': {**DOMAIN, 'CROMA': 'SAR'}}, 'domain', r"3 group\(s\)"),
    ({'size': DOMAIN}, 'domain', r"no grouping column 'domain'; the columns given are "
                                 r"\['size'\]"),
])
def test_bad_groups_are_refused(drift, groupings, column, message):
    with pytest.raises(ValueError, match=message):
        mechanism_tests(drift[2], groupings, column=column)


def test_drift_files_that_do_not_fit_are_refused(drift, tmp_path):
    _, values, paths = drift
    doc = _document(values['CLIP'])
    doc['settings']['pr_convention'] = 'centred'
    other = tmp_path / 'centred.json'
    other.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"mix pr_conventions \['centred', 'raw'\]"):
        mechanism_tests({**paths, 'CLIP': str(other)}, {'domain': DOMAIN})
    with pytest.raises(ValueError, match='no corrupted condition .* at severities'):
        mechanism_tests(paths, {'domain': DOMAIN}, severities=[2])


# --------------------------------------------------------------------- cosine floor
def test_the_split_half_cosine_floor_against_numpy():
    rng = np.random.default_rng(5)
    x = np.abs(rng.normal(size=(21, 6)))  # non-negative: a high floor
    for seed in (0, 4):
        permutation = np.random.default_rng(seed).permutation(21)
        a, b = x[permutation[:10]], x[permutation[10:20]]
        direct = np.mean((a * b).sum(1) / (np.linalg.norm(a, axis=1) *
                                           np.linalg.norm(b, axis=1)))
        assert split_half_cosine(x, seed) == pytest.approx(direct, rel=1e-12)
    assert split_half_cosine(x) > 0.5
    y = x + 0.1 * rng.normal(size=x.shape)
    sample = SampleDriftAccumulator(floor_seed=4).update(x[:7], y[:7]).update(x[7:], y[7:])
    assert sample.result()['cosine_floor'] == pytest.approx(split_half_cosine(x, 4))
    with pytest.raises(ValueError, match='n >= 2'):
        split_half_cosine(x[:1])
    # tokens: the pairs of every minibatch's halves (seeded by (seed, minibatch)), pooled
    tokens = rng.normal(size=(6, 5, 4)) + 1.0

    def pairs(rows, seed):
        permutation = np.random.default_rng(seed).permutation(len(rows))
        a, b = rows[permutation[:5]], rows[permutation[5:10]]
        return list((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))

    accumulator = DriftAccumulator(samples_per_minibatch=2, floor_seed=7)
    accumulator.update(tokens[:3], tokens[:3] * 0.5).update(tokens[3:], tokens[3:])
    cosines = [v for index in range(3)
               for v in pairs(tokens[2 * index:2 * index + 2].reshape(-1, 4), [7, index])]
    assert accumulator.result()['cosine_floor'] == pytest.approx(np.mean(cosines), rel=1e-12)
    # merged accumulators pool their pairs (each numbered its minibatches from 0)
    first = DriftAccumulator(2, floor_seed=7).update(tokens[:2], tokens[:2])
    second = DriftAccumulator(2, floor_seed=7).update(torch.as_tensor(tokens[2:4]),
                                                      torch.as_tensor(tokens[2:4]))
    expected = pairs(tokens[:2].reshape(-1, 4), [7, 0]) + pairs(tokens[2:4].reshape(-1, 4),
                                                                 [7, 0])
    assert first.merge(second).result()['cosine_floor'] == pytest.approx(np.mean(expected),
                                                                          rel=1e-12)


# --------------------------------------------------------------------- ECE ratio, cells
def test_ece_ratio_per_corruption_and_group_cells(results):
    values, paths = results
    model_set = load_model_set(paths, MODELS)
    ratio = ece_ratio(model_set)
    keys = [c.key for c in model_set.conditions]
    for i, m in enumerate(MODELS):
        clean = values[m][('clean', 0)][1]
        for c in CORRUPTIONS:
            for s in SEVERITIES:  # per corruption, not averaged over the corruptions
                assert ratio[i, keys.index(f'{c}@{s}')] == pytest.approx(
                    values[m][(c, s)][1] / clean, rel=1e-12)
    cells = group_cells(model_set, {'domain': DOMAIN})
    assert cells.measures[:2] == ['mIoU', ECE_KEY] and cells.measures[-1] == ECE_RATIO_KEY
    for label in ('EO', 'natural'):
        members = [m for m in MODELS if DOMAIN[m] == label]
        for (c, s) in [('clean', 0)] + [(c, s) for c in CORRUPTIONS for s in SEVERITIES]:
            key = 'clean' if s == 0 else f'{c}@{s}'
            for index, measure in ((0, 'mIoU'), (1, ECE_KEY)):
                assert cells.mean('domain', label, measure, key) == pytest.approx(
                    np.mean([values[m][(c, s)][index] for m in members]), rel=1e-12)
            assert cells.mean('domain', label, ECE_RATIO_KEY, key) == pytest.approx(
                np.mean([values[m][(c, s)][1] / values[m][('clean', 0)][1]
                         for m in members]), rel=1e-12)


def test_the_comparison_writes_the_cells(drift, results, tmp_path):
    values, paths = results
    comparison = compare_models(paths, names=MODELS, groups={'domain': DOMAIN},
                                drift_paths=drift[2], drift_draws=999, n_bootstrap=10,
                                paired=False)
    analysis = analyze_groups(comparison.model_set, {'domain': DOMAIN})
    assert analysis.cells is not None
    with checking_saved_figures() as checked:
        files = write_cross_model(comparison, str(tmp_path / 'out'))
    assert len(checked) == len([f for f in files if f.endswith('.png')])
    # the CKA correlation: the analytic p beside the permutation p, in the CSV and figure
    assert any(t.startswith('cloud@1, ρ = ') and '(analytic)' in t for t in checked)
    with open(files['cka_ece_inflation.csv']) as handle:
        spearman_rows = list(csv.DictReader(handle))
    for r in spearman_rows[::len(MODELS)]:
        c, s = r['condition'].split('@')
        x = [drift[1][m][r['condition']]['cka'] for m in MODELS]
        y = [values[m][(c, int(s))][1] - values[m][('clean', 0)][1] for m in MODELS]
        assert float(r['p_analytic']) == pytest.approx(stats.spearmanr(x, y).pvalue)
    assert osp.isfile(files['group_ece_ratio_by_corruption.png'])
    with open(files['group_cells.csv']) as handle:
        rows = list(csv.DictReader(handle))
    ratio_rows = [r for r in rows if r['measure'] == ECE_RATIO_KEY]
    assert len(ratio_rows) == 2 * len(CORRUPTIONS) * len(SEVERITIES)  # no clean row
    for r in rows:
        members = [m for m in MODELS if DOMAIN[m] == r['group']]
        c, s = r['corruption'], int(r['severity'])
        index = {'mIoU': 0, ECE_KEY: 1}.get(r['measure'])
        if index is None:
            expected = np.mean([values[m][(c, s)][1] / values[m][('clean', 0)][1]
                                for m in members])
        else:
            expected = np.mean([values[m][(c, s)][index] for m in members])
        assert int(r['n']) == 3 and float(r['mean']) == pytest.approx(expected, rel=1e-12)
    text = open(files['cross_model.md']).read()
    assert f'#### Grouping: domain — {ECE_RATIO_KEY}' in text
    doc = json.load(open(files['cross_model.json']))
    per_model = doc['groups']['cells']['ece_ratio_per_model']
    assert per_model['CLIP']['haze@5'] == pytest.approx(
        values['CLIP'][('haze', 5)][1] / values['CLIP'][('clean', 0)][1])


# --------------------------------------------------------------------- Spearman p
def test_the_analytic_spearman_p_beside_the_permutation_p(drift, results):
    x, y = [0.9, 0.7, 0.8, 0.4, 0.5, 0.2], [0.01, 0.03, 0.02, 0.08, 0.05, 0.09]
    rho, p, p_analytic = spearman_permutation_test(x, y, 2000, 0, analytic=True)
    assert (rho, p) == spearman_permutation_test(x, y, 2000, 0)
    assert p_analytic == pytest.approx(stats.spearmanr(x, y).pvalue, rel=1e-12)
    assert all(np.isnan(spearman_permutation_test([1, 2, 3], [5, 5, 5], 10, analytic=True)))
    _, drift_paths = drift[1:]
    ece, paths = results
    model_set = load_model_set(paths, MODELS)
    correlation = cka_ece_correlation(model_set, drift_paths, draws=999, seed=2)
    for row in correlation.rows:
        c, s = row.condition.split('@')
        x = [drift[1][m][row.condition]['cka'] for m in MODELS]
        y = [ece[m][(c, int(s))][1] - ece[m][('clean', 0)][1] for m in MODELS]
        reference = stats.spearmanr(x, y)
        assert row.rho == pytest.approx(reference.statistic, abs=1e-12)
        assert row.p_analytic == pytest.approx(reference.pvalue, rel=1e-12)
    assert correlation.to_dict()['conditions'][0]['p_analytic'] == pytest.approx(
        correlation.rows[0].p_analytic)


# --------------------------------------------------------------------- files and the tool
def test_the_tool_end_to_end(drift, results, tmp_path):
    _, values, paths = drift
    _, result_paths = results
    out = tmp_path / 'out'
    with checking_saved_figures() as checked:
        run = tool_result(TOOL, [*paths.values(), '--group', SPEC, '--results', *result_paths,
                                 '--permutations', '999', '--seed', '2', '--out-dir', out])
    assert run.returncode == 0, run.stderr
    assert len(checked) == 2
    expected = mechanism_tests(paths, {'domain': DOMAIN},
                               model_set=load_model_set(result_paths, MODELS), draws=999,
                               seed=2)
    doc = json.load(open(out / 'mechanism_tests.json'))
    assert doc == json.loads(json.dumps(expected.to_dict()))
    assert doc['tests'][0]['method'] == 'exact'
    with open(out / 'mechanism_tests.csv') as handle:
        rows = list(csv.DictReader(handle))
    for r in [r for r in rows if r['kind'] == 'test']:
        per_model = {m: float(x['value']) for x in rows for m in MODELS
                     if x['kind'] == 'model' and x['statistic'] == r['statistic']
                     and x['model'] == m}
        reference = stats.mannwhitneyu(*_split(per_model), alternative='two-sided')
        assert float(r['u']) == reference.statistic
        assert float(r['p_value']) == pytest.approx(reference.pvalue, rel=1e-12)
    header, library_rows = mechanism_csv_rows(expected)
    assert len(rows) == len(library_rows) and list(rows[0]) == header
    assert len([r for r in rows if r['kind'] == 'spearman']) == len(CONDITIONS)
    assert all(r['p_analytic'] for r in rows if r['kind'] == 'spearman')
    text = (out / 'mechanism_tests.md').read_text()
    assert '| B1 head-layer CKA |' in text and 'p (analytic)' in text
    assert text in run.stdout
    for name in (CKA_PLOT, PR_PLOT):
        assert (out / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    # named entries, --no-plots, only the top severity
    named = tool_result(TOOL, [f'{m}={p}' for m, p in paths.items()] + [
        '--group', SPEC, '--severities', '5', '--no-plots', '--out-dir', tmp_path / 'named'])
    assert named.returncode == 0, named.stderr
    doc = json.load(open(tmp_path / 'named' / 'mechanism_tests.json'))
    assert doc['severities'] == [5] and doc['cka_ece_inflation'] is None
    assert not osp.exists(tmp_path / 'named' / CKA_PLOT)
    files = write_mechanism_tests(expected, str(tmp_path / 'lib'), plots=False)
    assert open(files['mechanism_tests.csv']).read() == open(out / 'mechanism_tests.csv').read()


def test_the_tool_refuses_bad_input_in_one_line(drift, tmp_path):
    _, _, paths = drift
    groups_file = tmp_path / 'groups.json'
    groups_file.write_text(json.dumps({'size': DOMAIN}))
    drift_files = list(paths.values())
    cases = [
        ([*drift_files, '--group', SPEC + ',Prithvi=EO'], "unknown model(s) ['Prithvi']"),
        ([*drift_files[:5], '--group', SPEC], "unknown model(s) ['DINO']"),
        ([*drift_files, '--group', SPEC.replace('CROMA=EO', 'CROMA=natural').replace(
            'ScaleMAE=EO', 'ScaleMAE=natural')], "group 'EO' of column 'domain' has 1 model"),
        ([*drift_files, '--groups', str(groups_file)], "no grouping column 'domain'"),
        ([*drift_files, '--groups', str(groups_file), '--column', 'area'],
         "no grouping column 'area'"),
        ([*drift_files], 'give the groups'),
        ([*drift_files, '--group', SPEC, '--names', 'a', 'b'], '--names has 2 names for 6'),
        ([drift_files[0], f'ViT-IN={drift_files[1]}', '--group', SPEC], 'not both'),
        ([*drift_files, str(tmp_path / 'none.json'), '--group', SPEC], 'no such drift file'),
        ([*drift_files, '--group', SPEC, '--severities', '7'], '--severities are 1..5'),
        ([*drift_files, '--group', SPEC, '--results', drift_files[0]],
         '--results has 1 files for 6'),
    ]
    for argv, message in cases:
        run = tool_result(TOOL, [*argv, '--out-dir', tmp_path / 'x', '--no-plots'])
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode == 2, (argv, run.stderr)
        assert len(lines) == 1 and lines[0].startswith('error: ') and message in lines[0], \
            (message, run.stderr)


def test_the_tool_help_states_the_library_constants():
    """The tool's --help imports none of the package: the values it states are the
    library's own."""
    from reobench_mm.analysis.groups import DEFAULT_DRAWS
    from reobench_mm.analysis.mechanisms import DEFAULT_COLUMN, MIN_GROUP_MODELS
    from helpers import load_tool
    actions = {a.dest: a for a in load_tool(TOOL).build_parser()._actions}
    assert actions['column'].default == DEFAULT_COLUMN
    assert f'at least {MIN_GROUP_MODELS} models' in actions['column'].help
    assert f'(default {DEFAULT_DRAWS})' in actions['permutations'].help
