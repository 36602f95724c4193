"""The analysis of real distribution shifts across models: the pooled fits per shift type
against scipy.stats.linregress, the residuals, relative losses and group means against
numpy, the bootstrap over models, the refusals, reading results files and the tool;
metrics pooled within a shift type, protocols fitted apart, and the tool with both."""
import csv
import json
import os.path as osp
from dataclasses import replace

import numpy as np
import pytest
from scipy import special, stats

from helpers import tool_result
from reobench_mm.analysis.effective_robustness import effective_robustness_fit
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import ConditionResult
from reobench_mm.analysis.shift_report import write_shift_analysis
from reobench_mm.analysis.shift_points import ShiftPoint, load_shift_points
from reobench_mm.analysis.shifts import analyze_shifts

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


def _results(folder, clean, checkpoint, task='segmentation'):
    write_report(folder, {('clean', 0): ConditionResult(clean),
                          ('cloud', 3): ConditionResult(clean - 10)},
                 task=task, plots=False,
                 provenance=make_provenance(model='m', checkpoint_sha256=checkpoint))
    return osp.join(folder, 'results.json')


def _pairs_file(tmp_path, points, same_checkpoint=True):
    """A pairs CSV of results files of ``points`` (detection results for the points of
    metric mAP, segmentation for the others; a protocol column when a point has one)."""
    rows = []
    for i, p in enumerate(points):
        sha_id, sha_ood = f'{i:064d}', f'{i:064d}' if same_checkpoint else f'{i + 1:064d}'
        task = 'detection' if p.metric == 'mAP' else 'segmentation'
        rows.append(dict(model=p.model, group=p.group or '', dataset=p.dataset,
                         shift_type=p.shift_type,
                         id_results=osp.relpath(_results(str(tmp_path / f'id{i}'), p.id_value,
                                                         sha_id, task), tmp_path),
                         ood_results=osp.relpath(_results(str(tmp_path / f'ood{i}'),
                                                          p.ood_value, sha_ood, task),
                                                 tmp_path)))
        if any(q.protocol for q in points):
            rows[-1]['protocol'] = p.protocol or ''
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
    assert metric == 'mIoU' and {p.metric for p in loaded} == {'mIoU'}
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
    assert document['points'][0]['metric'] == 'mIoU' and 'protocol' not in document['points'][0]
    with open(osp.join(out, 'shift_analysis.csv')) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(points) and rows[0]['metric'] == 'mIoU' and 'protocol' not in rows[0]
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
    assert sorted(files) == ['shift_analysis.csv', 'shift_analysis.json', 'shift_analysis.md',
                             'shift_ranking.csv']
    text = open(files['shift_analysis.md']).read()
    assert '| geo_a | geofm | potsdam->vaihingen | geographic |' in text


def _two_metrics(points):
    """``points`` with mIoU on potsdam->vaihingen, mAP on the other pairs: geographic pools
    two metrics, source has one."""
    return [replace(p, metric='mIoU' if p.dataset == 'potsdam->vaihingen' else 'mAP')
            for p in points]


def test_pooled_metrics_give_one_fit_over_all_the_points_of_a_type():
    points = _two_metrics(_points())
    analysis = analyze_shifts(points, n_bootstrap=50, pool_metrics=True)
    members = [p for p in points if p.shift_type == 'geographic']
    slope, intercept = np.polyfit([p.id_value for p in members],
                                  [p.ood_value for p in members], 1)
    fit = analysis.fits['linear']['geographic']
    assert len(fit.models) == 8 and {p.metric for p in members} == {'mIoU', 'mAP'}
    assert fit.slope == pytest.approx(slope, rel=1e-10)
    assert fit.intercept == pytest.approx(intercept, rel=1e-10)
    assert analysis.metrics == ['mIoU', 'mAP']
    assert analysis.to_dict()['points'][4]['metric'] == 'mAP'
    with pytest.raises(ValueError, match=r'^geographic: points of several metrics \(mIoU, '
                       r'mAP\); pool_metrics=True \(--pool-metrics\) fits one line'):
        analyze_shifts(points, n_bootstrap=0)
    # one metric per shift type needs no pooling
    by_type = [replace(p, metric='mAP' if p.shift_type == 'source' else 'mIoU')
               for p in points]
    assert analyze_shifts(by_type, n_bootstrap=0).fits['linear']['geographic'].slope == \
        pytest.approx(analysis.fits['linear']['geographic'].slope, rel=1e-12)


def _two_protocols(points):
    """``points`` as frozen, and shifted values of the same pairs as full."""
    rng = np.random.default_rng(11)
    full = [replace(p, id_value=p.id_value + float(rng.uniform(2, 10)),
                    ood_value=p.ood_value + float(rng.uniform(0, 12)), protocol='full')
            for p in points]
    return [replace(p, protocol='frozen') for p in points] + full


def test_two_protocols_give_two_independent_analyses():
    points = _two_protocols(_points())
    analysis = analyze_shifts(points, n_bootstrap=100, seed=2)
    assert analysis.protocols == ['frozen', 'full']
    for protocol in ('frozen', 'full'):
        subset = [replace(p, protocol=None) for p in points if p.protocol == protocol]
        alone = analyze_shifts(subset, n_bootstrap=100, seed=2)
        offset = 0 if protocol == 'frozen' else len(subset)
        for space in ('linear', 'logit'):
            for shift_type in ('geographic', 'source'):
                fit = analysis.protocol_fits[protocol][space][shift_type]
                reference = alone.fits[space][shift_type]
                assert fit.slope == pytest.approx(reference.slope, rel=1e-12)
                np.testing.assert_allclose(fit.residual_low, reference.residual_low,
                                           atol=1e-10)
        members = [p for p in subset if p.shift_type == 'source']
        slope, _ = np.polyfit([p.id_value for p in members], [p.ood_value for p in members], 1)
        assert analysis.protocol_fits[protocol]['linear']['source'].slope == pytest.approx(
            slope, rel=1e-10)
        assert analysis.protocol_groups[protocol] == alone.groups
        assert analysis.residual(offset + 5) == alone.residual(5)
        ranked = analysis.rankings[protocol]['linear'].to_dict()
        assert ranked.pop('protocol') == protocol
        assert ranked == {k: v for k, v in alone.rankings[None]['linear'].to_dict().items()
                          if k != 'protocol'}
    # not one line over both protocols' points
    both = [p for p in points if p.shift_type == 'source']
    pooled, _ = np.polyfit([p.id_value for p in both], [p.ood_value for p in both], 1)
    for protocol in ('frozen', 'full'):
        slope = analysis.protocol_fits[protocol]['linear']['source'].slope
        assert abs(slope - pooled) > 0.01
    document = analysis.to_dict()
    assert document['protocols'] == ['frozen', 'full']
    assert document['fits']['full']['linear']['source']['points'] == 4
    assert document['groups']['frozen']['all']['geofm']['points'] == 6
    assert document['points'][-1]['protocol'] == 'full'
    with pytest.raises(ValueError, match=r'several protocols \(\[.frozen., .full.\]\)'):
        analysis.fits


@pytest.mark.parametrize('change,message', [
    (lambda ps: ps + [ps[-1]], r'rand on dior->dota is given twice under protocol full'),
    (lambda ps: ps + [replace(ps[0], protocol=None, dataset='x->y')],
     r'geo_a on x->y names no protocol while other points do'),
])
def test_protocol_refusals(change, message):
    with pytest.raises(ValueError, match=message):
        analyze_shifts(change(_two_protocols(_points())), n_bootstrap=0)


def test_the_tool_with_protocols_and_pooled_metrics(tmp_path):
    points = _two_protocols(_two_metrics(_points()))
    path = _pairs_file(tmp_path, points)
    with pytest.raises(ValueError, match=r'pairs\.csv line 6 \(geo_a on urban->rural\): '
                       r'results of another task or metric \(detection mAP; line 2: '
                       r'segmentation mIoU\); --pool-metrics'):
        load_shift_points(path)
    loaded, metric = load_shift_points(path, pool_metrics=True)
    assert metric == 'pooled'
    assert [(p.protocol, p.metric) for p in loaded] == [(p.protocol, p.metric) for p in points]
    out = str(tmp_path / 'out')
    refused = tool_result('analysis_tools/shift_analysis.py', [path, '--out-dir', out])
    assert refused.returncode != 0 and '--pool-metrics' in refused.stderr
    run = tool_result('analysis_tools/shift_analysis.py', [path, '--out-dir', out,
                                                           '--bootstrap', '100',
                                                           '--pool-metrics'])
    assert run.returncode == 0, run.stderr[-3000:]
    expected = analyze_shifts(loaded, n_bootstrap=100, pool_metrics=True)
    with open(osp.join(out, 'shift_analysis.csv')) as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:6] == ['protocol', 'model', 'group', 'dataset', 'shift_type',
                                 'metric']
    assert [(r['protocol'], r['metric']) for r in rows] == \
        [(p.protocol, p.metric) for p in points]
    with open(osp.join(out, 'shift_ranking.csv')) as handle:
        ranked = list(csv.DictReader(handle))
    assert len(ranked) == 2 * 2 * 4  # protocols x spaces x models
    row = next(r for r in ranked if (r['protocol'], r['space'], r['model']) ==
               ('full', 'logit', 'inet'))
    model = next(m for m in expected.rankings['full']['logit'].models if m.model == 'inet')
    assert float(row['mean_er']) == pytest.approx(model.mean_er['value'], rel=1e-12)
    assert float(row['mean_rank_high']) == model.mean_rank['high']
    assert float(row['rank_source']) == model.shift_types['source']['rank']
    text = open(osp.join(out, 'shift_analysis.md')).read()
    assert '### frozen, linear (' in text and '### full, logit (' in text
    assert '| full | geo_a | geofm | urban->rural | geographic | mAP |' in text
    assert '| Protocol | Shift | Space | a | b | R² | Points |' in text
    assert 'metrics pooled within each shift type: mIoU, mAP' in text
    with open(osp.join(out, 'shift_analysis.json')) as handle:
        document = json.load(handle)
    assert document['metric'] == 'pooled' and document['pool_metrics'] is True
    assert document['ranking']['frozen']['linear']['models'][0]['model'] == \
        expected.rankings['frozen']['linear'].models[0].model
    assert document['fits']['frozen']['linear']['geographic']['slope'] == pytest.approx(
        expected.protocol_fits['frozen']['linear']['geographic'].slope, rel=1e-12)
    for name in ('ood_vs_id_frozen.png', 'ood_vs_id_full.png'):
        assert osp.getsize(osp.join(out, name)) > 10000
    assert not osp.exists(osp.join(out, 'ood_vs_id.png'))
