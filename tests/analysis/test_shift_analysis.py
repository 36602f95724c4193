"""The analysis of real distribution shifts across models: the pooled fits per shift type
against scipy.stats.linregress, the residuals, relative losses and group means against
numpy, the bootstrap over models, the refusals, reading results files and the tool."""
import csv
import json
import os.path as osp

import numpy as np
import pytest
from scipy import special, stats

from helpers import tool_result
from reobench_mm.analysis.effective_robustness import effective_robustness_fit
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.analysis.shift_report import write_shift_analysis
from reobench_mm.analysis.shifts import ShiftPoint, analyze_shifts, load_shift_points

GROUPS = {'geo_a': 'geofm', 'geo_b': 'geofm', 'inet': 'imagenet', 'rand': 'random'}


def _points():
    rng = np.random.default_rng(4)
    points = []
    for dataset, shift_type in (('potsdam->vaihingen', 'geographic'),
                                ('urban->rural', 'geographic'), ('dior->dota', 'source')):
        for model, group in GROUPS.items():
            id_value = float(rng.uniform(55, 85))
            points.append(ShiftPoint(model, dataset, shift_type, id_value,
                                     float(id_value * rng.uniform(0.7, 0.9)), group))
    return points


def test_the_pooled_fit_per_shift_type_is_linregress():
    points = _points()
    analysis = analyze_shifts(points, n_bootstrap=200, seed=1)
    for shift_type in ('geographic', 'source'):
        members = [p for p in points if p.shift_type == shift_type]
        x = np.array([p.id_value for p in members])
        y = np.array([p.ood_value for p in members])
        reference = stats.linregress(x, y)
        fit = analysis.fits['linear'][shift_type]
        assert len(fit.models) == len(members) == (8 if shift_type == 'geographic' else 4)
        assert fit.slope == pytest.approx(reference.slope, rel=1e-12)
        assert fit.intercept == pytest.approx(reference.intercept, rel=1e-12)
        assert fit.r_squared == pytest.approx(reference.rvalue ** 2, rel=1e-12)
        np.testing.assert_allclose(fit.residuals, y - (reference.slope * x +
                                                       reference.intercept), atol=1e-10)
        logit = stats.linregress(special.logit(x / 100), special.logit(y / 100))
        assert analysis.fits['logit'][shift_type].slope == pytest.approx(logit.slope,
                                                                         rel=1e-12)
        index = points.index(members[2])
        assert analysis.residual(index)['value'] == pytest.approx(
            y[2] - (reference.slope * x[2] + reference.intercept), abs=1e-10)


def test_losses_and_group_means_against_numpy():
    points = _points()
    analysis = analyze_shifts(points, n_bootstrap=0)
    relative = np.array([(p.id_value - p.ood_value) / p.id_value for p in points])
    np.testing.assert_allclose([p.relative_loss for p in points], relative, rtol=1e-14)
    residuals = np.array([analysis.residual(i)['value'] for i in range(len(points))])
    for shift_type in ('geographic', 'source', 'all'):
        for group in ('geofm', 'imagenet', 'random', 'all'):
            chosen = [i for i, p in enumerate(points)
                      if shift_type in ('all', p.shift_type) and group in ('all', p.group)]
            block = analysis.groups[shift_type][group]
            assert block['points'] == len(chosen)
            assert block['relative_loss'] == pytest.approx(relative[chosen].mean(), rel=1e-12)
            assert block['ood'] == pytest.approx(np.mean([points[i].ood_value
                                                          for i in chosen]), rel=1e-12)
            assert block['effective_robustness'] == pytest.approx(
                residuals[chosen].mean(), abs=1e-10)
    # the residuals of one least-squares fit average to zero over its points
    assert analysis.groups['source']['all']['effective_robustness'] == pytest.approx(
        0, abs=1e-9)


def test_the_bootstrap_resamples_models_with_all_their_points():
    x = np.array([60., 70., 80., 65., 75., 85.])
    y = np.array([50., 58., 66., 52., 61., 70.])
    names = ['a', 'b', 'c', 'd', 'e', 'f']
    # one point per cluster: the same draws as the bootstrap of points
    alone = effective_robustness_fit(x, y, models=names, name='t', n_bootstrap=300, seed=3)
    clustered = effective_robustness_fit(x, y, models=names, name='t', n_bootstrap=300,
                                         seed=3, clusters=names)
    np.testing.assert_allclose(alone.band_low, clustered.band_low, atol=1e-12)
    # two points per model: a model's points move together, so the band differs, and
    # the same seed gives the same band
    models = ['a', 'a', 'b', 'b', 'c', 'c']
    one = effective_robustness_fit(x, y, models=names, name='t', n_bootstrap=300, seed=3,
                                   clusters=models)
    two = effective_robustness_fit(x, y, models=names, name='t', n_bootstrap=300, seed=3,
                                   clusters=models)
    np.testing.assert_array_equal(one.band_low, two.band_low)
    assert not np.allclose(one.band_low, alone.band_low)
    with pytest.raises(ValueError, match='5 clusters for 6 points'):
        effective_robustness_fit(x, y, models=names, name='t', clusters=models[:5])


@pytest.mark.parametrize('points,message', [
    ([ShiftPoint('a', 'p->v', 'geographic', 70, 60), ShiftPoint('a', 'p->v', 'geographic',
                                                                71, 61)], 'given twice'),
    ([ShiftPoint('a', 'p->v', 'geographic', 70, 60), ShiftPoint('b', 'p->v', 'scale', 71,
                                                                61)], 'several shift types'),
    ([], 'no shift points'),
])
def test_bad_point_sets_are_refused(points, message):
    with pytest.raises(ValueError, match=message):
        analyze_shifts(points)


def test_bad_points_are_refused():
    with pytest.raises(ValueError, match='ood_value must be a metric in 0..100'):
        ShiftPoint('a', 'p->v', 'geographic', 70, 160)
    with pytest.raises(ValueError, match='non-empty shift_type'):
        ShiftPoint('a', 'p->v', '', 70, 60)


def test_one_id_value_gives_a_note_not_a_fit():
    points = [ShiftPoint('a', 'p->v', 'temporal', 70, 60),
              ShiftPoint('b', 'x->y', 'geographic', 70, 50),
              ShiftPoint('c', 'x->y', 'geographic', 80, 60)]
    analysis = analyze_shifts(points, n_bootstrap=50)
    assert analysis.fits['linear']['temporal'] is None
    assert analysis.residual(0) == {'value': None, 'low': None, 'high': None}
    assert any(n.startswith('temporal: 1 point(s)') for n in analysis.notes)
    assert analysis.groups['temporal']['all']['effective_robustness'] is None


def _results(folder, clean, checkpoint):
    write_report(folder, {('clean', 0): ConditionResult(clean),
                          ('cloud', 3): ConditionResult(clean - 10)},
                 task='segmentation', plots=False,
                 provenance=make_provenance(model='m', checkpoint_sha256=checkpoint))
    return osp.join(folder, 'results.json')


def _pairs_file(tmp_path, points, same_checkpoint=True):
    rows = []
    for i, p in enumerate(points):
        sha_id, sha_ood = f'{i:064d}', f'{i:064d}' if same_checkpoint else f'{i + 1:064d}'
        rows.append(dict(model=p.model, group=p.group or '', dataset=p.dataset,
                         shift_type=p.shift_type,
                         id_results=osp.relpath(_results(str(tmp_path / f'id{i}'), p.id_value,
                                                         sha_id), tmp_path),
                         ood_results=osp.relpath(_results(str(tmp_path / f'ood{i}'),
                                                          p.ood_value, sha_ood), tmp_path)))
    path = str(tmp_path / 'pairs.csv')
    with open(path, 'w', newline='') as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_points_from_results_files_and_the_tool(tmp_path):
    points = _points()
    path = _pairs_file(tmp_path, points)
    loaded, metric = load_shift_points(path)
    assert metric == 'mIoU'
    assert [(p.model, p.dataset, p.group) for p in loaded] == \
        [(p.model, p.dataset, p.group) for p in points]
    np.testing.assert_allclose([p.id_value for p in loaded], [p.id_value for p in points])
    out = str(tmp_path / 'out')
    run = tool_result('analysis_tools/shift_analysis.py', [path,
                          '--out-dir', out, '--bootstrap', '200'])
    assert run.returncode == 0, run.stderr[-3000:]
    assert '## Group means' in run.stdout
    with open(osp.join(out, 'shift_analysis.json')) as handle:
        document = json.load(handle)
    expected = analyze_shifts(loaded, n_bootstrap=200)
    assert document['fits']['linear']['source']['slope'] == pytest.approx(
        expected.fits['linear']['source'].slope, rel=1e-12)
    assert document['groups']['all']['geofm']['points'] == 6
    with open(osp.join(out, 'shift_analysis.csv')) as handle:
        assert len(list(csv.DictReader(handle))) == len(points)
    assert osp.getsize(osp.join(out, 'ood_vs_id.png')) > 10000
    # the OOD results of another checkpoint are refused
    other = tmp_path / 'other'
    other.mkdir()
    with pytest.raises(ValueError, match='different checkpoints'):
        load_shift_points(_pairs_file(other, points[:2], same_checkpoint=False))


def test_pairs_files_as_spreadsheets_save_them(tmp_path):
    """A byte-order mark is read; Latin-1 text, a short row and a long row are one error
    naming the file and line (not a KeyError on 'model' or a NoneType join)."""
    points = _points()
    path = _pairs_file(tmp_path, points)
    text = open(path, encoding='utf-8').read()
    with open(path, 'w', encoding='utf-8-sig', newline='') as handle:
        handle.write(text)
    loaded, _ = load_shift_points(path)
    assert [p.model for p in loaded] == [p.model for p in points]
    lines = text.splitlines(keepends=True)
    cases = (
        (('Modèle,' + lines[0]).encode('latin-1'),
         rf'{path} is not UTF-8 text \(byte 0xe8 at offset 3\): save it as UTF-8'),
        ((lines[0] + lines[1].rsplit(',', 2)[0] + '\r\n').encode(),
         rf'{path} line 2 has 4 field\(s\), the header 6 \(model, '),
        ((lines[0] + lines[1].rstrip('\r\n') + ',x\r\n').encode(),
         rf'{path} line 2 has 7 field\(s\), the header 6'))
    for data, message in cases:
        with open(path, 'wb') as handle:
            handle.write(data)
        with pytest.raises(ValueError, match=message):
            load_shift_points(path)


def test_write_without_plots(tmp_path):
    files = write_shift_analysis(analyze_shifts(_points(), n_bootstrap=20), str(tmp_path),
                                 'mIoU', plots=False)
    assert sorted(files) == ['shift_analysis.csv', 'shift_analysis.json', 'shift_analysis.md']
    text = open(files['shift_analysis.md']).read()
    assert '| geo_a | geofm | potsdam->vaihingen | geographic |' in text
