"""The ranking of models across shift types (EarthShift's per-model table): the mean
effective robustness and ranks per shift type and their means against an independent
numpy computation (np.polyfit per type, hand-made average ranks), ties and a model lacking
a shift type; the bootstrap intervals: reproducible, holding their estimates, and one
resample equal to a direct computation from the resample's drawn models."""
import numpy as np
import pytest
from scipy import special

from reobench_mm.analysis.shift_report import ranking_csv, ranking_markdown
from reobench_mm.analysis.shifts import ShiftPoint, analyze_shifts

MODELS = ('a', 'b', 'c', 'd', 'e')
PAIRS = (('p->v', 'geographic'), ('u->r', 'geographic'), ('dior->dota', 'source'),
         ('t1->t2', 'temporal'))


def _points(seed=7):
    """Five models on four dataset pairs of three shift types; ``e`` has no temporal
    point, ``d`` has the same source point as ``c`` (a tie in that type)."""
    rng = np.random.default_rng(seed)
    points = []
    for dataset, shift_type in PAIRS:
        for model in MODELS:
            if model == 'e' and shift_type == 'temporal':
                continue
            if model == 'd' and shift_type == 'source':
                twin = points[-1]
                points.append(ShiftPoint('d', dataset, shift_type, twin.id_value,
                                         twin.ood_value))
                continue
            id_value = float(rng.uniform(55, 85))
            points.append(ShiftPoint(model, dataset, shift_type, id_value,
                                     id_value * float(rng.uniform(0.7, 0.9))))
    return points


def _hand_ranks(means):
    """Rank 1 for the highest mean; tied values share the average of their ranks."""
    values = list(means.values())
    return {m: 1 + sum(u > v for u in values) + (sum(u == v for u in values) - 1) / 2
            for m, v in means.items()}


def _space(space):
    if space == 'linear':
        return (lambda v: np.asarray(v, dtype=float)), (lambda v: v)
    return (lambda v: special.logit(np.asarray(v) / 100)), (lambda v: 100 * special.expit(v))


def _type_means(members, slope, intercept, space):
    """Each model's mean residual of ``members`` against the line (slope, intercept)."""
    to, back = _space(space)
    x = np.array([p.id_value for p in members])
    y = np.array([p.ood_value for p in members])
    residuals = y - back(slope * to(x) + intercept)
    owners = np.array([p.model for p in members])
    return {m: float(np.mean(residuals[owners == m])) for m in dict.fromkeys(owners)}


def _reference(points, space):
    """Per type {model: mean ER} and {model: rank}, then per model the means."""
    to, _ = _space(space)
    er, ranks = {}, {}
    for shift_type in dict.fromkeys(p.shift_type for p in points):
        members = [p for p in points if p.shift_type == shift_type]
        slope, intercept = np.polyfit(to([p.id_value for p in members]),
                                      to([p.ood_value for p in members]), 1)
        er[shift_type] = _type_means(members, slope, intercept, space)
        ranks[shift_type] = _hand_ranks(er[shift_type])
    means = {m: (np.mean([er[t][m] for t in er if m in er[t]]),
                 np.mean([ranks[t][m] for t in ranks if m in ranks[t]])) for m in MODELS}
    return er, ranks, means


@pytest.mark.parametrize('space', ['linear', 'logit'])
def test_the_table_is_a_direct_computation(space):
    points = _points()
    ranking = analyze_shifts(points, n_bootstrap=0).rankings[None][space]
    er, ranks, means = _reference(points, space)
    assert ranking.shift_types == ['geographic', 'source', 'temporal']
    assert len(ranking.models) == 5 and ranking.n_resamples == 0
    # c and d tie in source: both get the mean of their two ranks
    assert ranks['source']['c'] == ranks['source']['d'] and ranks['source']['c'] % 1 == 0.5
    for row in ranking.models:
        assert sorted(row.shift_types) == sorted(t for t in er if row.model in er[t])
        for shift_type, values in row.shift_types.items():
            assert values['er'] == pytest.approx(er[shift_type][row.model], abs=1e-9)
            assert values['rank'] == ranks[shift_type][row.model]
            assert values['er_low'] is None and values['rank_high'] is None
        assert row.mean_er['value'] == pytest.approx(means[row.model][0], abs=1e-9)
        assert row.mean_rank['value'] == pytest.approx(means[row.model][1], abs=1e-12)
        assert row.missing == (['temporal'] if row.model == 'e' else [])
    # rows by mean rank
    assert [r.model for r in ranking.models] == sorted(
        MODELS, key=lambda m: (means[m][1], -means[m][0]))
    e_row = next(r for r in ranking.models if r.model == 'e')
    assert e_row.shift_types['geographic']['points'] == 2
    assert e_row.mean_rank['value'] == pytest.approx(
        (ranks['geographic']['e'] + ranks['source']['e']) / 2, abs=1e-12)
    assert ranking.notes == ['e has no point of shift type(s) temporal: its mean ER and '
                             'mean rank are over the 2 shift type(s) it has']


def test_the_table_in_markdown_and_csv():
    analysis = analyze_shifts(_points(), n_bootstrap=50, seed=1)
    text = '\n'.join(ranking_markdown(analysis))
    assert '### linear (' in text and '### logit (' in text
    assert '| Model | Group | Types | geographic | source | temporal | Mean ER |' in text
    e_line = next(line for line in text.splitlines() if line.startswith('| e |'))
    assert '| 2/3 * |' in e_line and e_line.count('| – |') == 2  # group and temporal
    rows = ranking_csv(analysis).splitlines()
    assert rows[0].startswith('space,model,group,shift_types,missing,points_geographic,'
                              'er_geographic,er_geographic_low,er_geographic_high,'
                              'rank_geographic,')
    assert len(rows) == 1 + 2 * 5
    e_cells = next(r for r in rows if r.startswith('linear,e,')).split(',')
    assert e_cells[3:5] == ['2', 'temporal']
    assert any('e has no point of shift type(s) temporal' in n for n in analysis.notes)


def test_intervals_are_reproducible_and_hold_their_estimates():
    points = _points()
    one = analyze_shifts(points, n_bootstrap=400, seed=3).rankings[None]['linear']
    two = analyze_shifts(points, n_bootstrap=400, seed=3).rankings[None]['linear']
    other = analyze_shifts(points, n_bootstrap=400, seed=4).rankings[None]['linear']
    assert one.to_dict() == two.to_dict()
    np.testing.assert_array_equal(one.er_resamples, two.er_resamples)
    assert one.to_dict() != other.to_dict()
    assert 350 < one.n_resamples <= 400
    for row in one.models:
        for block in (row.mean_er, row.mean_rank):
            assert block['low'] <= block['value'] <= block['high']
            assert block['low'] < block['high']
        for values in row.shift_types.values():
            assert values['er_low'] <= values['er'] <= values['er_high']
            assert 1 <= values['rank_low'] <= values['rank_high'] <= 5


def test_one_resample_is_the_resampled_lines_applied_to_every_point():
    """Resample b of every type: the line of the models that draw b picks (rebuilt from
    the generator), every model's residuals against it (drawn or not), per type means and
    ranks, then the means over the types."""
    points, n_bootstrap, seed = _points(), 120, 5
    analysis = analyze_shifts(points, n_bootstrap=n_bootstrap, seed=seed)
    ranking = analysis.rankings[None]['linear']
    order = [r.model for r in ranking.models]
    means = ranking.mean_resamples()
    for b in (0, ranking.n_resamples // 2, ranking.n_resamples - 1):
        draw = int(ranking.draws[b])
        er, ranks = {}, {}
        for shift_type in ranking.shift_types:
            members = [p for p in points if p.shift_type == shift_type]
            names = list(dict.fromkeys(p.model for p in members))
            drawn = np.random.default_rng(seed).integers(
                0, len(names), size=(n_bootstrap, len(names)))[draw]
            chosen = [p for k in drawn for p in members if p.model == names[k]]
            slope, intercept = np.polyfit([p.id_value for p in chosen],
                                          [p.ood_value for p in chosen], 1)
            fit = analysis.fits['linear'][shift_type]
            kept = list(fit.boot_draws).index(draw)
            assert fit.boot_slopes[kept] == pytest.approx(slope, rel=1e-9)
            assert fit.boot_intercepts[kept] == pytest.approx(intercept, rel=1e-9, abs=1e-9)
            er[shift_type] = _type_means(members, slope, intercept, 'linear')
            ranks[shift_type] = _hand_ranks(er[shift_type])
        for i, model in enumerate(order):
            for j, shift_type in enumerate(ranking.shift_types):
                if model not in er[shift_type]:
                    assert np.isnan(ranking.er_resamples[b, i, j])
                    continue
                assert ranking.er_resamples[b, i, j] == pytest.approx(er[shift_type][model],
                                                                      abs=1e-9)
                assert ranking.rank_resamples[b, i, j] == ranks[shift_type][model]
            have = [t for t in er if model in er[t]]
            assert means['mean_er'][b, i] == pytest.approx(
                np.mean([er[t][model] for t in have]), abs=1e-9)
            assert means['mean_rank'][b, i] == pytest.approx(
                np.mean([ranks[t][model] for t in have]), abs=1e-12)


def test_a_type_without_a_line_is_left_out():
    points = _points() + [ShiftPoint('a', 'x->y', 'sensor', 70, 60)]
    analysis = analyze_shifts(points, n_bootstrap=20)
    ranking = analysis.rankings[None]['linear']
    assert 'sensor' not in ranking.shift_types
    assert ranking.notes[0] == ('shift type(s) sensor have no fitted line and are left out '
                                'of the ranking')
    assert ranking.notes[0] in analysis.notes
