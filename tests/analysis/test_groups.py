"""Groups of models in the cross-model comparison: the numbers compared against direct
numpy, group means against numpy, Mann–Whitney U against scipy for every pair and
number, the ECE ratio of the strongest severity to clean, the Spearman permutation test
against a plain loop of the same draws, CKA against ECE inflation from drift files,
the refusals, the files written and the command-line tool."""
import csv
import json
import os.path as osp

import numpy as np
import pytest
from scipy import stats

import reobench_mm  # noqa: F401
from reobench_mm.analysis.compare import compare_models, write_cross_model
from reobench_mm.analysis.groups import (analyze_groups, check_groupings, cka_ece_correlation,
                                         group_numbers, match_drift_files, parse_group_spec,
                                         read_groups_file, spearman_permutation_test)
from reobench_mm.analysis.model_set import load_model_set
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.evaluation.keys import ECE_KEY

from helpers import load_tool, tool_result
from reobench_cli import run_tool

VERSIONS = {'numpy': '0'}
MODELS = ['SatMAE', 'ScaleMAE', 'CROMA', 'ViT-IN', 'R50-IN']
CORRUPTIONS = ['cloud', 'haze']
SEVERITIES = [1, 3, 5]
DOMAIN = {'SatMAE': 'EO', 'ScaleMAE': 'EO', 'CROMA': 'EO', 'ViT-IN': 'ImageNet',
          'R50-IN': 'ImageNet'}
SIZE = {'SatMAE': 'large', 'ScaleMAE': 'large', 'CROMA': 'base', 'ViT-IN': 'base',
        'R50-IN': 'small'}


def _values(seed=0, models=MODELS):
    """Per model ``{(corruption, severity): (value, ece)}`` with known random numbers."""
    rng = np.random.default_rng(seed)
    out = {}
    for model in models:
        clean, ece = rng.uniform(50, 80), rng.uniform(0.02, 0.06)
        table = {('clean', 0): (clean, ece)}
        for c in CORRUPTIONS:
            for s in SEVERITIES:
                table[(c, s)] = (clean - rng.uniform(1, 5) * s, ece + rng.uniform(0, 0.02) * s)
        out[model] = table
    return out


def _write(root, model, table, sha=None):
    results = {c: ConditionResult(v, per_class=None, extra={} if e is None else {ECE_KEY: e})
               for c, (v, e) in table.items()}
    out = osp.join(str(root), model)
    write_report(out, results, protocol='reobench', task='segmentation', plots=False,
                 provenance=make_provenance(model=model, versions=VERSIONS,
                                            checkpoint_sha256=sha))
    return osp.join(out, 'results.json')


@pytest.fixture(scope='module')
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp('groups')
    values = _values()
    paths = [_write(root, m, values[m], sha=f'sha-{m}') for m in MODELS]
    return root, values, paths


def _direct_numbers(values):
    """The compared numbers computed directly from the constructed values."""
    out = {}
    for model, table in values.items():
        clean, clean_ece = table[('clean', 0)]
        means = {c: np.mean([table[(c, s)][0] for s in SEVERITIES]) for c in CORRUPTIONS}
        avg = np.mean(list(means.values()))
        row = {'clean': clean, 'avg': avg, 'delta_tp': clean - avg,
               'relative_drop': (clean - avg) / clean}
        for c in CORRUPTIONS:
            row[f'{c}@mean'] = means[c]
            row[f'{c}@relative_drop'] = (clean - means[c]) / clean
        ece_means = [np.mean([table[(c, s)][1] for s in SEVERITIES]) for c in CORRUPTIONS]
        row[f'{ECE_KEY}@clean'] = clean_ece
        row[f'{ECE_KEY}@avg'] = np.mean(ece_means)
        row[f'{ECE_KEY}@5/clean'] = np.mean([table[(c, 5)][1] for c in CORRUPTIONS]) / clean_ece
        out[model] = row
    return out


def test_the_numbers_compared_against_direct_computation(sweep):
    _, values, paths = sweep
    numbers = group_numbers(load_model_set(paths))
    direct = _direct_numbers(values)
    assert list(numbers) == ['clean', 'cloud@mean', 'haze@mean', 'avg', 'delta_tp',
                             'relative_drop', 'cloud@relative_drop', 'haze@relative_drop',
                             f'{ECE_KEY}@clean', f'{ECE_KEY}@avg', f'{ECE_KEY}@5/clean']
    for key, (_, got) in numbers.items():
        np.testing.assert_allclose(got, [direct[m][key] for m in MODELS], rtol=1e-12,
                                   err_msg=key)


def test_group_means_and_mann_whitney_of_every_pair(sweep):
    _, values, paths = sweep
    analysis = analyze_groups(load_model_set(paths), {'domain': DOMAIN, 'size': SIZE})
    direct = _direct_numbers(values)
    domain, size = analysis.groupings['domain'], analysis.groupings['size']
    assert domain.labels == ['EO', 'ImageNet'] and size.labels == ['large', 'base', 'small']
    assert domain.members == {'EO': MODELS[:3], 'ImageNet': MODELS[3:]}
    pairs_seen = set()
    for grouping, mapping in ((domain, DOMAIN), (size, SIZE)):
        for key in analysis.numbers:
            by = {label: np.array([direct[m][key] for m in MODELS if mapping[m] == label])
                  for label in grouping.labels}
            for label in grouping.labels:
                assert grouping.means[key][label] == pytest.approx(np.mean(by[label]),
                                                                   rel=1e-12)
            for t in [t for t in grouping.tests if t.number == key]:
                reference = stats.mannwhitneyu(by[t.first], by[t.second],
                                               alternative='two-sided')
                assert t.u == pytest.approx(reference.statistic)
                assert t.p_value == pytest.approx(reference.pvalue)
                pairs_seen.add((grouping.name, t.first, t.second))
    # every pair of groups, every number
    assert pairs_seen == {('domain', 'EO', 'ImageNet'), ('size', 'large', 'base'),
                          ('size', 'large', 'small'), ('size', 'base', 'small')}
    assert len(size.tests) == 3 * len(analysis.numbers)
    # the ECE ratio (calibration study Fig. 5): per-model ratio, then the group mean
    ratio = f'{ECE_KEY}@5/clean'
    assert analysis.ratio_severity == 5
    assert domain.means[ratio]['ImageNet'] == pytest.approx(
        np.mean([np.mean([values[m][(c, 5)][1] for c in CORRUPTIONS]) /
                 values[m][('clean', 0)][1] for m in ('ViT-IN', 'R50-IN')]))
    # one group only: means, no tests, a note
    one = analyze_groups(load_model_set(paths), {'all': {m: 'x' for m in MODELS}})
    assert one.groupings['all'].tests == [] and 'one group' in one.notes[0]


def test_the_ratio_uses_the_strongest_severity_with_a_note(tmp_path):
    values = _values(seed=3)
    trimmed = {m: {k: v for k, v in t.items() if k[1] in (0, 1, 3)} for m, t in values.items()}
    paths = [_write(tmp_path, m, trimmed[m]) for m in MODELS]
    analysis = analyze_groups(load_model_set(paths), {'domain': DOMAIN})
    assert analysis.ratio_severity == 3 and 'strongest severity compared is 3' in \
        analysis.notes[0]
    assert analysis.values[f'{ECE_KEY}@3/clean'][0] == pytest.approx(
        np.mean([trimmed['SatMAE'][(c, 3)][1] for c in CORRUPTIONS]) /
        trimmed['SatMAE'][('clean', 0)][1])


@pytest.mark.parametrize('groupings, message', [
    ({'domain': {**DOMAIN, 'Prithvi': 'EO'}}, r"unknown model\(s\) \['Prithvi'\]"),
    ({'domain': {m: DOMAIN[m] for m in MODELS[:4]}}, r"no group to model\(s\) \['R50-IN'\]"),
    ({'domain': {**DOMAIN, 'CROMA': ' '}}, 'empty or non-text label'),
    ({'': DOMAIN}, 'non-empty name'),
    ({}, 'groups must be'),
])
def test_bad_groupings_are_refused_by_name(groupings, message):
    with pytest.raises(ValueError, match=message):
        check_groupings(groupings, MODELS)


def test_group_specs_and_files(tmp_path):
    assert parse_group_spec('domain: A=EO, B=EO ,C=ImageNet') == (
        'domain', {'A': 'EO', 'B': 'EO', 'C': 'ImageNet'})
    for bad, message in (('domain', 'NAME:MODEL=LABEL'), ('d:A=EO,B', "'B' is not"),
                         ('d:A=EO,A=IN', 'twice')):
        with pytest.raises(ValueError, match=message):
            parse_group_spec(bad)
    good = tmp_path / 'groups.json'
    good.write_text(json.dumps({'domain': DOMAIN}))
    assert read_groups_file(str(good)) == {'domain': DOMAIN}
    for text, message in (('[1]', 'JSON object'), ('{"d": {"A": 1}}', 'group labels'),
                          ('{', 'not valid JSON')):
        bad = tmp_path / 'bad.json'
        bad.write_text(text)
        with pytest.raises(ValueError, match=message):
            read_groups_file(str(bad))


# --------------------------------------------------------------------- permutation test
def _loop_permutation_test(x, y, draws, seed):
    """The permutation test re-implemented: a loop of ``rng.permutation`` of y's ranks,
    Pearson of ranks by numpy.corrcoef."""
    rank_x, rank_y = stats.rankdata(x), stats.rankdata(y)
    rho = np.corrcoef(rank_x, rank_y)[0, 1]
    rng = np.random.default_rng(seed)
    reached = sum(abs(np.corrcoef(rank_x, rng.permutation(rank_y))[0, 1]) >= abs(rho) - 1e-12
                  for _ in range(draws))
    return rho, (1 + reached) / (1 + draws)


@pytest.mark.parametrize('x, y, draws, seed', [
    ([0.9, 0.7, 0.8, 0.4, 0.5, 0.2], [0.01, 0.03, 0.02, 0.08, 0.05, 0.09], 2000, 0),
    ([0.9, 0.7, 0.7, 0.4, 0.5, 0.5, 0.1], [0.02, 0.03, 0.02, 0.04, 0.05, 0.01, 0.06], 12001, 5),
    ([1.0, 2.0, 3.0, 4.0], [4.0, 1.0, 3.0, 2.0], 999, 7),     # few models: ties in the null
])
def test_the_permutation_test_against_a_plain_loop(x, y, draws, seed):
    rho, p = spearman_permutation_test(x, y, draws, seed)
    assert rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    loop_rho, loop_p = _loop_permutation_test(x, y, draws, seed)
    assert rho == pytest.approx(loop_rho, abs=1e-12)
    assert p == loop_p  # same draws, same count: bit for bit
    assert 1 / (1 + draws) <= p <= 1


def test_the_permutation_test_edge_cases():
    assert all(np.isnan(spearman_permutation_test([1, 2, 3], [5, 5, 5], 10)))
    assert all(np.isnan(spearman_permutation_test([1, 2], [2, 1], 10)))
    # n = 4, perfect order: |rho| = 1 reached by 2 of the 24 orderings
    rho, p = spearman_permutation_test([1, 2, 3, 4], [1, 2, 3, 4], 20000, 1)
    assert rho == pytest.approx(1.0) and p == pytest.approx(2 / 24, abs=0.01)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match='draws must be'):
            spearman_permutation_test([1, 2, 3], [1, 2, 3], bad)


# --------------------------------------------------------------------- CKA against ECE
def _drift_document(cka, sha=None, final='backbone.layer4', missing=()):
    conditions = [{'condition': 'clean', 'corruption': 'clean', 'severity': 0,
                   'blocks': {'backbone.layer2': {'cka': 1.0}, final: {'cka': 1.0}}}]
    for (c, s), value in cka.items():
        if f'{c}@{s}' in missing:
            continue
        conditions.append({'condition': f'{c}@{s}', 'corruption': c, 'severity': s,
                           'blocks': {'backbone.layer2': {'cka': 0.99}, final: {'cka': value}}})
    return {'format': 'reobench_mm.representation_drift/3',
            'blocks': [{'name': 'backbone.layer2'}, {'name': final}],
            'settings': {'protocol': 'reobench', 'representation': 'sample'},
            'conditions': conditions, 'provenance': {'checkpoint_sha256': sha}}


@pytest.fixture(scope='module')
def drift(sweep, tmp_path_factory):
    root = tmp_path_factory.mktemp('drift')
    rng = np.random.default_rng(11)
    cka = {m: {(c, s): float(rng.uniform(0.3, 1.0)) for c in ('cloud', 'haze')
               for s in (1, 5)} for m in MODELS}
    paths = []
    for i, m in enumerate(MODELS):
        path = root / f'{m}.json'
        # one model lacks haze@1: that condition is left out of every model
        path.write_text(json.dumps(_drift_document(cka[m], sha=f'sha-{m}',
                                                   missing=('haze@1',) if i == 2 else ())))
        paths.append(str(path))
    return cka, paths


def test_cka_against_ece_inflation_per_condition(sweep, drift):
    _, values, paths = sweep
    cka, drift_paths = drift
    result = cka_ece_correlation(load_model_set(paths), drift_paths, draws=3000, seed=4)
    assert [r.condition for r in result.rows] == ['cloud@1', 'cloud@5', 'haze@5']
    assert 'haze@1' in result.notes[0]
    assert set(result.blocks.values()) == {'backbone.layer4'}  # the final hooked block
    for row in result.rows:
        c, s = row.condition.split('@')
        x = [cka[m][(c, int(s))] for m in MODELS]
        y = [values[m][(c, int(s))][1] - values[m][('clean', 0)][1] for m in MODELS]
        np.testing.assert_allclose(row.cka, x)
        np.testing.assert_allclose(row.inflation, y, rtol=1e-12)
        loop_rho, loop_p = _loop_permutation_test(x, y, 3000, 4)
        assert row.rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
        assert row.rho == pytest.approx(loop_rho, abs=1e-12) and row.p_value == loop_p
    # by name, in another order: the same rows
    named = dict(reversed(list(zip(MODELS, drift_paths))))
    again = cka_ece_correlation(load_model_set(paths), named, draws=3000, seed=4)
    assert [(r.rho, r.p_value) for r in again.rows] == [(r.rho, r.p_value) for r in result.rows]


def test_drift_files_that_do_not_fit_are_refused(sweep, drift, tmp_path):
    _, values, paths = sweep
    cka, drift_paths = drift
    model_set = load_model_set(paths)
    with pytest.raises(ValueError, match='4 drift files for 5 models'):
        match_drift_files(model_set, drift_paths[:4])
    with pytest.raises(ValueError, match=r"unknown names \['Other'\]"):
        match_drift_files(model_set, {**dict(zip(MODELS, drift_paths)), 'Other': 'x'})
    other = tmp_path / 'other.json'
    other.write_text(json.dumps(_drift_document(cka['CROMA'], sha='another')))
    with pytest.raises(ValueError, match='another checkpoint'):
        match_drift_files(model_set, drift_paths[:2] + [str(other)] + drift_paths[3:])
    token = tmp_path / 'token.json'
    doc = _drift_document(cka['CROMA'])
    doc['settings']['representation'] = 'token'
    token.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match='mix representations'):
        match_drift_files(model_set, drift_paths[:2] + [str(token)] + drift_paths[3:])
    wrong = tmp_path / 'wrong.json'
    wrong.write_text(json.dumps({'format': 'something/1'}))
    with pytest.raises(ValueError, match='not a representation drift file'):
        match_drift_files(model_set, drift_paths[:4] + [str(wrong)])
    no_ece = [_write(tmp_path / 'plain', m, {k: (v, None) for k, (v, _) in t.items()})
              for m, t in list(values.items())[:3]]
    with pytest.raises(ValueError, match='needs calib/ECE'):
        cka_ece_correlation(load_model_set(no_ece), drift_paths[:3])


# --------------------------------------------------------------------- files and the tool
def test_the_comparison_writes_the_groups(sweep, drift, tmp_path):
    _, values, paths = sweep
    _, drift_paths = drift
    comparison = compare_models(paths, groups={'domain': DOMAIN, 'size': SIZE},
                                drift_paths=drift_paths, drift_draws=999, n_bootstrap=20,
                                paired=False)
    files = write_cross_model(comparison, str(tmp_path / 'out'))
    for name in ('groups.csv', 'cka_ece_inflation.csv', 'group_relative_drop.png',
                 'group_ece_ratio.png', 'cka_vs_ece_inflation.png'):
        assert osp.isfile(files[name]), name
    with open(files['groups.csv']) as handle:
        rows = list(csv.DictReader(handle))
    direct = _direct_numbers(values)
    mean_rows = [r for r in rows if r['kind'] == 'mean']
    assert len(mean_rows) == (2 + 3) * 11
    for r in mean_rows:
        mapping = DOMAIN if r['grouping'] == 'domain' else SIZE
        members = [m for m in MODELS if mapping[m] == r['group']]
        assert int(r['n']) == len(members)
        assert float(r['value']) == pytest.approx(np.mean([direct[m][r['number']]
                                                           for m in members]), rel=1e-12)
    for r in [r for r in rows if r['kind'] == 'mann_whitney']:
        mapping = DOMAIN if r['grouping'] == 'domain' else SIZE
        a = [direct[m][r['number']] for m in MODELS if mapping[m] == r['group']]
        b = [direct[m][r['number']] for m in MODELS if mapping[m] == r['other_group']]
        reference = stats.mannwhitneyu(a, b, alternative='two-sided')
        assert float(r['value']) == pytest.approx(reference.statistic)
        assert float(r['p_value']) == pytest.approx(reference.pvalue)
    doc = json.load(open(files['cross_model.json']))
    assert doc['groups']['groupings']['domain']['n'] == {'EO': 3, 'ImageNet': 2}
    assert doc['cka_ece_inflation']['draws'] == 999
    assert doc['synthetic_vs_real'] is None  # no shift in these results
    text = open(files['cross_model.md']).read()
    assert '## Groups of models' in text and '### Grouping: size' in text
    assert '## Representation drift against ECE inflation' in text


def test_the_tool_takes_groups_and_drift_files(sweep, drift, tmp_path):
    _, _, paths = sweep
    _, drift_paths = drift
    groups_file = tmp_path / 'groups.json'
    groups_file.write_text(json.dumps({'size': SIZE}))
    spec = 'domain:' + ','.join(f'{m}={g}' for m, g in DOMAIN.items())
    out = tmp_path / 'cli'
    run = tool_result('analysis_tools/robustness_compare.py', [
        *paths, '--group', spec, '--groups', str(groups_file), '--drift', *drift_paths,
        '--drift-permutations', '999', '--bootstrap', '20', '--no-paired', '--no-plots',
        '--out-dir', str(out)])
    assert run.returncode == 0, run.stderr
    doc = json.load(open(out / 'cross_model.json'))
    expected = compare_models(paths, groups={'domain': DOMAIN, 'size': SIZE},
                              drift_paths=drift_paths, drift_draws=999, n_bootstrap=20,
                              paired=False)
    assert doc['groups'] == json.loads(json.dumps(expected.groups.to_dict()))
    assert doc['cka_ece_inflation'] == json.loads(json.dumps(expected.cka_ece.to_dict()))


@pytest.mark.parametrize('extra, message', [
    (['--group', 'domain:SatMAE=EO,Prithvi=EO'], "unknown model(s) ['Prithvi']"),
    (['--group', 'domain:SatMAE'], "'SatMAE' is not MODEL=LABEL"),
    (['--group', 'domain'], 'NAME:MODEL=LABEL'),
    (['--group', 'd:' + ','.join(f'{m}=x' for m in MODELS), '--group',
      'd:' + ','.join(f'{m}=y' for m in MODELS)], "grouping 'd' is given twice"),
    (['--drift', 'SatMAE=a.json', 'b.json'], 'not both'),
    (['--drift', 'no_such.json'], 'no such drift file'),
    (['--drift-permutations', '0'], '--drift-permutations must be >= 1'),
])
def test_the_tool_refuses_bad_groups_in_one_line(sweep, tmp_path, capsys, extra, message):
    _, _, paths = sweep
    tool = load_tool('analysis_tools/robustness_compare.py')
    status = run_tool(tool.main, [*paths, '--no-paired', '--no-plots', '--bootstrap', '5',
                                  '--out-dir', str(tmp_path), *extra]) \
        if 'Prithvi' in message else None
    if status is None:
        with pytest.raises(SystemExit) as exit_info:
            tool.main([*paths, '--out-dir', str(tmp_path), *extra])
        status = exit_info.value.code
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == 2 and message in err and err.startswith('error:')
