"""Mitigation deltas (reobench_mm.analysis.mitigation, tools/analysis_tools/mitigation_table.py):
temperature scaling, an ensemble against its members and the selective-prediction gain,
each checked against a direct numpy computation on results files written here, with
uneven severities; refusals; the signed-ECE plot; the tool in a subprocess; and one
real sweep of the tiny demo UperNet with temperature scaling."""
import csv
import json
import math
import os.path as osp

import numpy as np
import pytest

import reobench_mm  # noqa: F401
from reobench_mm.analysis.mitigation import (MITIGATION_FORMAT, ensemble_tables,
                                             mitigation_report, selective_gain_tables,
                                             signed_ece, temperature_scaling_table,
                                             write_mitigation)
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.analysis.results_file import read_results
from reobench_cli import run_tool

from helpers import SEG_DEMO_CONFIG, load_tool, tool_result
from figure_checks import checking_saved_figures

#: the loader's notes on derived names and restricted conditions are warnings too
pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
VERSIONS = {'numpy': '0'}  # fixed: no package metadata look-ups
#: Uneven severities: cloud at 1, 2, 3; haze at 1, 3; rotate at 2 only.
CONDITIONS = [('clean', 0), ('cloud', 1), ('cloud', 2), ('cloud', 3), ('haze', 1),
              ('haze', 3), ('rotate', 2)]
MEASURES = ('ECE', 'NLL', 'Brier')
TOL = dict(rel=1e-12, abs=1e-12)


def _values(seed, prefixes=('calib', 'calib_ts')):
    """``condition -> {'value', 'extra'}`` of random but plausible numbers."""
    rng = np.random.default_rng(seed)
    out = {}
    for condition in CONDITIONS:
        extra = {'aAcc': round(float(rng.uniform(40, 95)), 2), 'mAcc': 50.0}
        for prefix in prefixes:
            extra.update({f'{prefix}/ECE': rng.uniform(0.01, 0.3),
                          f'{prefix}/NLL': rng.uniform(0.1, 2.0),
                          f'{prefix}/Brier': rng.uniform(0.1, 1.0),
                          f'{prefix}/gap': rng.uniform(-0.2, 0.3),
                          f'{prefix}/acc@90cov': rng.uniform(0.4, 1.0)})
        out[condition] = {'value': float(rng.uniform(20, 80)),
                          'extra': {k: float(v) for k, v in extra.items()}}
    return out


def _write(root, folder, values, model=None, seed=0, task='segmentation', temperature=0.7):
    """``root/folder/results.json`` of ``values`` (as :func:`_values` gives them)."""
    results = {c: ConditionResult(v['value'], None, v['extra']) for c, v in values.items()}
    extra = {} if temperature is None else {'temperature': {
        'temperature': temperature, 'source': 'held-out split of the test set',
        'num_images': 2}}
    out_dir = osp.join(str(root), folder)
    write_report(out_dir, results, protocol='reobench', task=task, plots=False,
                 provenance=make_provenance(model=model, seed=seed, versions=VERSIONS,
                                            extra=extra))
    return osp.join(out_dir, 'results.json')


def _column(values, key):
    """``{condition: value}`` of one quantity (``'value'`` or an extra key)."""
    return {c: v['value'] if key == 'value' else v['extra'][key] for c, v in values.items()}


def _rows_by_hand(delta, treated, reference):
    """The rows of the uneven layout, written out: the severity rows average the
    per-condition deltas over the corruptions at that severity; Avg is REOBench's Avg of
    the treated values minus that of the reference values."""
    def avg(x):  # mean over corruptions of each corruption's mean over its severities
        cloud = (x[('cloud', 1)] + x[('cloud', 2)] + x[('cloud', 3)]) / 3
        haze = (x[('haze', 1)] + x[('haze', 3)]) / 2
        return (cloud + haze + x[('rotate', 2)]) / 3
    return {'clean': (1, delta[('clean', 0)]),
            '1': (2, (delta[('cloud', 1)] + delta[('haze', 1)]) / 2),
            '2': (2, (delta[('cloud', 2)] + delta[('rotate', 2)]) / 2),
            '3': (2, (delta[('cloud', 3)] + delta[('haze', 3)]) / 2),
            'avg': (3, avg(treated) - avg(reference))}


def _check_table(table, quantity, delta, treated, reference):
    for condition, value in delta.items():
        key = 'clean' if condition[0] == 'clean' else f'{condition[0]}@{condition[1]}'
        assert table.per_condition[key][quantity] == pytest.approx(value, **TOL), key
    expected = _rows_by_hand(delta, treated, reference)
    assert [r.label for r in table.rows] == list(expected)
    for label, (count, value) in expected.items():
        row = table.row(label)
        assert row.count == count, label
        assert row.values[quantity] == pytest.approx(value, **TOL), (quantity, label)


# ----------------------------------------------------------------------------------
# temperature scaling
# ----------------------------------------------------------------------------------
def test_temperature_scaling_deltas_equal_numpy(tmp_path):
    values = _values(1)
    table = temperature_scaling_table(read_results(_write(tmp_path, 'ts', values)))
    for measure in MEASURES:
        ts, cal = _column(values, f'calib_ts/{measure}'), _column(values, f'calib/{measure}')
        delta = {c: np.subtract(ts[c], cal[c]) for c in CONDITIONS}
        _check_table(table, measure, delta, ts, cal)
    # the task metric: one prediction per condition, so exactly 0 everywhere
    assert all(v['mIoU'] == 0.0 for v in table.per_condition.values())
    assert all(r.values['mIoU'] == 0.0 for r in table.rows)
    assert list(table.columns.values()) == ['ΔECE', 'ΔNLL', 'ΔBrier', 'ΔmIoU']
    assert any('ΔmIoU = 0' in n for n in table.notes)
    assert any('0.700, from held-out split' in n for n in table.notes)
    assert any('different severities' in n for n in table.notes)


def test_temperature_scaling_refusals(tmp_path):
    values = _values(2)
    del values[('haze', 3)]['extra']['calib_ts/NLL']
    with pytest.raises(ValueError, match=r"no 'calib_ts/NLL' in condition\(s\) haze@3; run "
                       'the sweep with --temperature-scaling'):
        temperature_scaling_table(read_results(_write(tmp_path, 'a', values)))
    with pytest.raises(ValueError, match='records the temperature -1.0; temperature '
                       'scaling needs a finite T > 0'):
        temperature_scaling_table(read_results(_write(tmp_path, 'b', _values(2),
                                                      temperature=-1.0)))
    detection = _write(tmp_path, 'det', _values(2), task='detection')
    with pytest.raises(ValueError, match='holds detection results'):
        mitigation_report(detection)
    # no calib_ts at all: no temperature-scaling table, and a note saying why
    report = mitigation_report(_write(tmp_path, 'plain', _values(3, prefixes=('calib', ))))
    assert [t.name for t in report.tables] == ['selective_gain']
    assert 'no temperature-scaling table' in report.notes[0]
    # no calibration: refused
    bare = {c: {'value': 50.0, 'extra': {'aAcc': 90.0}} for c in CONDITIONS}
    with pytest.raises(ValueError, match="no 'calib/ECE' in condition"):
        mitigation_report(_write(tmp_path, 'bare', bare))


# ----------------------------------------------------------------------------------
# ensemble against its members
# ----------------------------------------------------------------------------------
def _ensemble_files(tmp_path, clean=(60.0, 70.0, 65.0)):
    members = []
    for i, value in enumerate(clean):
        values = _values(10 + i, prefixes=('calib', ))
        values[('clean', 0)]['value'] = value
        members.append(values)
    # the last member is the best one under corruption, not the best clean one
    for condition in CONDITIONS[1:]:
        members[2][condition]['value'] = 90.0
    ensemble = _values(20, prefixes=('calib', ))
    paths = [_write(tmp_path, f'seed{i}', v, model='upernet') for i, v in enumerate(members)]
    return _write(tmp_path, 'ensemble', ensemble, model='ensemble'), paths, ensemble, members


def test_ensemble_deltas_equal_numpy(tmp_path):
    ens_path, member_paths, ensemble, members = _ensemble_files(tmp_path)
    (vs_mean, vs_best), model_set = ensemble_tables(ens_path, member_paths)
    assert model_set.models == ['ensemble', 'upernet (seed0)', 'upernet (seed1)',
                                'upernet (seed2)']
    for quantity, key in [(m, f'calib/{m}') for m in MEASURES] + [('mIoU', 'value')]:
        ens = _column(ensemble, key)
        cols = [_column(m, key) for m in members]
        mean = {c: float(np.mean([col[c] for col in cols])) for c in CONDITIONS}
        _check_table(vs_mean, quantity, {c: ens[c] - mean[c] for c in CONDITIONS}, ens, mean)
        best = cols[1]  # the highest clean mIoU (70), though seed2 is better corrupted
        _check_table(vs_best, quantity, {c: ens[c] - best[c] for c in CONDITIONS}, ens, best)
    assert 'best member (upernet (seed1))' in vs_best.title
    assert 'highest clean mIoU (upernet (seed1), 70.00' in vs_best.definition
    assert any('keeps no per-image statistics' in n for n in vs_mean.notes)


def test_best_member_ties_go_to_the_first_given(tmp_path):
    ens_path, member_paths, _, _ = _ensemble_files(tmp_path, clean=(70.0, 70.0, 65.0))
    (_, vs_best), _ = ensemble_tables(ens_path, member_paths)
    assert 'best member (upernet (seed0))' in vs_best.title
    (_, vs_best), model_set = ensemble_tables(ens_path, member_paths,
                                              ['ens', 'a', 'b', 'c'])
    assert model_set.models == ['ens', 'a', 'b', 'c'] and vs_best.title.endswith('(a)')
    with pytest.raises(ValueError, match='unique'):
        ensemble_tables(ens_path, member_paths, ['ens', 'a', 'a', 'c'])


def test_ensemble_mismatches_are_refused(tmp_path):
    ens_path, member_paths, _, members = _ensemble_files(tmp_path)
    lacking = {c: v for c, v in members[0].items() if c != ('haze', 3)}
    short = _write(tmp_path, 'short', lacking, model='upernet')
    with pytest.raises(ValueError, match=f'{short} .evaluated at severities 1, 2, 3. lacks '
                       'haze at severities 3'):
        ensemble_tables(ens_path, [short] + member_paths[1:])
    # restricted on request: the conditions all have, every delta over them
    (vs_mean, _), model_set = ensemble_tables(ens_path, [short] + member_paths[1:],
                                              common_conditions=True)
    assert 'haze@3' not in vs_mean.per_condition and len(model_set.conditions) == 6
    assert vs_mean.row('3').count == 1
    other_seed = _write(tmp_path, 'other_seed', members[0], model='upernet', seed=5)
    with pytest.raises(ValueError, match='other corruption seeds'):
        ensemble_tables(ens_path, [other_seed] + member_paths[1:])
    detection = _write(tmp_path, 'det', members[0], model='det', task='detection')
    with pytest.raises(ValueError, match='must share one task'):
        ensemble_tables(ens_path, [detection] + member_paths[1:])
    with pytest.raises(ValueError, match='more than once'):
        ensemble_tables(ens_path, [ens_path] + member_paths[1:])
    with pytest.raises(ValueError, match='at least 2 members'):
        ensemble_tables(ens_path, member_paths[:1])
    no_calib = {c: {'value': v['value'], 'extra': {'aAcc': 80.0}}
                for c, v in members[0].items()}
    with pytest.raises(ValueError, match="no 'calib/ECE'"):
        ensemble_tables(ens_path, [_write(tmp_path, 'nc', no_calib, model='u')]
                        + member_paths[1:])
    with pytest.raises(ValueError, match='needs both'):
        mitigation_report(ens_path, ensemble=ens_path)


# ----------------------------------------------------------------------------------
# selective prediction and the signed calibration error
# ----------------------------------------------------------------------------------
def test_selective_gain_in_percentage_points(tmp_path):
    values = _values(4)
    tables = selective_gain_tables(read_results(_write(tmp_path, 'sel', values)))
    assert [t.name for t in tables] == ['selective_gain', 'selective_gain_ts']
    accuracy = _column(values, 'aAcc')  # percent
    for table, prefix in zip(tables, ('calib', 'calib_ts')):
        acc90 = {c: 100.0 * v for c, v in _column(values, f'{prefix}/acc@90cov').items()}
        _check_table(table, 'acc90', acc90, acc90, {c: 0.0 for c in CONDITIONS})
        _check_table(table, 'acc', accuracy, accuracy, {c: 0.0 for c in CONDITIONS})
        gain = {c: acc90[c] - accuracy[c] for c in CONDITIONS}
        _check_table(table, 'gain', gain, acc90, accuracy)


def test_selective_gain_refusals(tmp_path):
    values = _values(5)
    del values[('cloud', 2)]['extra']['aAcc']
    with pytest.raises(ValueError, match=r"no 'aAcc' in condition\(s\) cloud@2; the pixel "
                       "accuracy at full coverage is IoUMetric's aAcc"):
        selective_gain_tables(read_results(_write(tmp_path, 'a', values)))
    values = _values(5)
    values[('haze', 1)]['extra']['aAcc'] = 123.0
    with pytest.raises(ValueError, match=r'aAcc of haze@1 is 123.0, outside 0..100 \(a '
                       r'percentage\)'):
        selective_gain_tables(read_results(_write(tmp_path, 'b', values)))
    values = _values(5)
    values[('haze', 1)]['extra']['calib/acc@90cov'] = 91.0  # a percentage, not a fraction
    with pytest.raises(ValueError, match=r'outside 0..1 \(a fraction\)'):
        selective_gain_tables(read_results(_write(tmp_path, 'c', values)))


def test_signed_ece_and_its_plot(tmp_path):
    values = _values(6)
    results = read_results(_write(tmp_path, 'gap', values))
    curves = signed_ece(results.summary)
    assert list(curves) == ['calib', 'calib_ts']
    for prefix in curves:
        gap = _column(values, f'{prefix}/gap')
        assert curves[prefix]['clean'] == gap[('clean', 0)]
        assert curves[prefix]['per_corruption'] == {
            'cloud': {s: gap[('cloud', s)] for s in (1, 2, 3)},
            'haze': {s: gap[('haze', s)] for s in (1, 3)}, 'rotate': {2: gap[('rotate', 2)]}}
    report = mitigation_report(results.path)
    with checking_saved_figures() as checked:
        files = write_mitigation(report, str(tmp_path / 'out'))
    assert len(checked) == 1
    from PIL import Image
    with Image.open(files['signed_ece.png']) as image:
        width, height = image.size
    assert width > 800 and height > 400
    assert not osp.exists(tmp_path / 'out2' / 'signed_ece.png')
    files = write_mitigation(report, str(tmp_path / 'out2'), plot=False)
    assert 'signed_ece.png' not in files and not osp.exists(tmp_path / 'out2' / 'signed_ece.png')


# ----------------------------------------------------------------------------------
# the tool
# ----------------------------------------------------------------------------------
def test_tool_writes_its_files(tmp_path):
    ts = _write(tmp_path, 'ts', _values(7))
    ens_path, member_paths, _, _ = _ensemble_files(tmp_path)
    out = tmp_path / 'out'
    result = tool_result('analysis_tools/mitigation_table.py', [ts, '--ensemble', ens_path,
         '--members', *member_paths, '--out-dir', str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'warning: model name' in result.stderr  # the members' names were derived
    for name in ('mitigation.md', 'mitigation.csv', 'mitigation.json', 'signed_ece.png'):
        assert (out / name).is_file() and str(out / name) in result.stdout
    text = (out / 'mitigation.md').read_text(encoding='utf-8')
    assert text in result.stdout
    assert '## Temperature scaling (clean-fitted T) − as evaluated' in text
    assert '| Severity | n | ΔECE | ΔNLL | ΔBrier | ΔmIoU |' in text
    report = mitigation_report(ts, ens_path, member_paths)
    table = report.table('ensemble_vs_mean')
    avg = table.row('avg')
    cells = ' | '.join(f'{avg.values[q]:+.{table.digits[q]}f}' for q in table.columns)
    assert f'| Avg | 3 | {cells} |' in text
    doc = json.loads((out / 'mitigation.json').read_text(encoding='utf-8'))
    assert doc['format'] == MITIGATION_FORMAT
    assert doc['ensemble']['best_member'] == 'upernet (seed1)'
    assert list(doc['tables']) == ['temperature_scaling', 'ensemble_vs_mean',
                                   'ensemble_vs_best', 'selective_gain', 'selective_gain_ts']
    for name, entry in doc['tables'].items():
        expected = report.table(name)
        assert [r['row'] for r in entry['rows']] == [r.label for r in expected.rows]
        for row, want in zip(entry['rows'], expected.rows):
            for q, v in want.values.items():
                assert row[q] == v  # the file holds the unrounded numbers
    with open(out / 'mitigation.csv', newline='', encoding='utf-8') as handle:
        rows = list(csv.DictReader(handle))
    # per table: 7 conditions and 5 rows (clean, 3 severities, avg), x its quantities
    assert len(rows) == sum((7 + 5) * len(t.columns) for t in report.tables)
    gain = [r for r in rows if r['table'] == 'selective_gain' and r['row'] == 'avg'
            and r['quantity'] == 'gain']
    assert float(gain[0]['value']) == report.table('selective_gain').row('avg').values['gain']


def test_tool_refusals_are_one_error_line(tmp_path, capsys):
    ens_path, member_paths, _, members = _ensemble_files(tmp_path)
    short = _write(tmp_path, 'short', {c: v for c, v in members[0].items()
                                       if c != ('cloud', 1)}, model='upernet')
    tool = load_tool('analysis_tools/mitigation_table.py')
    out = tmp_path / 'out'
    assert run_tool(tool.main, [ens_path, '--ensemble', ens_path, '--members', short,
                                *member_paths[1:], '--out-dir', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith('error: the results files do not hold the same conditions')
    assert 'lacks cloud at severities 1' in err[-1] and not out.exists()
    for arguments, message in (([ens_path, '--members', *member_paths], 'go together'),
                               ([ens_path, '--ensemble', ens_path, '--members',
                                 member_paths[0]], 'at least 2 results files'),
                               ([ens_path, '--common-conditions'], 'applies to the ensemble'),
                               ([ens_path, '--names', 'a'], 'applies to the ensemble'),
                               ([ens_path, '--ensemble', ens_path, '--members', *member_paths,
                                 '--names', 'a', 'b'], '2 names for 4 files'),
                               ([str(tmp_path / 'none.json')], 'no such results file')):
        with pytest.raises(SystemExit) as stop:
            tool.main(arguments)
        assert stop.value.code == 2
        assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------------
# a real sweep
# ----------------------------------------------------------------------------------
@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_on_a_real_sweep_of_the_demo_upernet(demo_data, tmp_path):
    """The tiny demo UperNet (freshly initialised) swept with temperature scaling: every
    temperature-scaling delta equals the condition records' own calib_ts − calib."""
    from reobench_mm.robustness.sweep import RobustnessSweep
    from sweep_helpers import sweep_options, untrained_checkpoint
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    sweep = RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, work_dir=str(tmp_path / 'sweep'),
                            cfg_options=sweep_options(osp.join(demo_data, 'potsdam'))[0],
                            corruptions=['cloud', 'gaussian_noise'], severities=[1, 5],
                            calibration=True, temperature_scaling=True, temperature_split=1,
                            plots=False)
    outcome = sweep.run()
    report = mitigation_report(osp.join(outcome.work_dir, 'results.json'))
    table = report.table('temperature_scaling')
    records = {}
    for condition in outcome.conditions:
        with open(sweep.condition_file(condition), encoding='utf-8') as handle:
            records[condition.key] = json.load(handle)['metrics']
    assert set(records) == set(table.per_condition)
    for key, metrics in records.items():
        for measure in MEASURES:
            expected = metrics[f'calib_ts/{measure}'] - metrics[f'calib/{measure}']
            assert table.per_condition[key][measure] == pytest.approx(expected, **TOL)
        gain = report.table('selective_gain').per_condition[key]['gain']
        assert gain == pytest.approx(100 * metrics['calib/acc@90cov'] - metrics['aAcc'],
                                     **TOL)
    nll = [records[f'{n}@5']['calib_ts/NLL'] - records[f'{n}@5']['calib/NLL']
           for n in ('cloud', 'gaussian_noise')]
    assert table.row(5).values['NLL'] == pytest.approx(sum(nll) / 2, **TOL)
    assert math.isfinite(table.row('avg').values['ECE'])
    files = write_mitigation(report, str(tmp_path / 'out'))
    assert osp.isfile(files['signed_ece.png'])
