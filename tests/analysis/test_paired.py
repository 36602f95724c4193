"""Paired tests of two models on the same images (reobench_mm.analysis.paired), against
scipy.stats on the same numbers, and rank flips on constructed cases."""
import numpy as np
import pytest
from scipy import stats

from reobench_corruptions.condition import Condition
from reobench_mm.analysis.paired import (benjamini_hochberg, flip_p_value, kendall_tau_b_rows,
                                         paired_numbers, permutation_p_values, swap_masks)
from reobench_mm.evaluation.functional.condition_stats import ImageStats
from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats

CLEAN = Condition()
NOISE = Condition('gaussian_noise', 3)
UNION = 1000  # every image's union: IoU = mean intersection / UNION, a mean-type metric


def _stats(intersections, ids=None):
    """One-class statistics whose mIoU is the mean of ``intersections / UNION`` x 100."""
    intersections = np.asarray(intersections, dtype=np.int64)
    areas = np.stack([intersections, np.full_like(intersections, UNION),
                      np.full_like(intersections, UNION)], axis=-1)
    # union = pred + label - intersection must stay UNION: label = UNION, pred = intersection
    areas[:, 1] = intersections
    ids = ids or [f'{i}.png' for i in range(len(intersections))]
    return ImageStats(ids, SegmentationImageStats(areas[:, None, :]))


def _per_image(intersections):
    return np.asarray(intersections, dtype=np.float64) / UNION * 100


def test_one_class_stats_give_a_mean_type_metric():
    values = [100, 250, 400, 900]
    assert _stats(values).task.values()[0] == pytest.approx(_per_image(values).mean())


def test_exact_paired_permutation_p_value_equals_scipy():
    rng = np.random.default_rng(0)
    a = rng.integers(100, 900, 10)
    b = np.clip(a - rng.integers(-40, 120, 10), 0, UNION)
    ours = paired_numbers({CLEAN: _stats(a)}, {CLEAN: _stats(b)}, [], permutations=5000,
                          resamples=200)
    assert ours.exact and ours.permutations == 2 ** 10
    reference = stats.permutation_test(
        (_per_image(a), _per_image(b)), lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type='samples', vectorized=True, n_resamples=np.inf,
        alternative='two-sided')
    assert ours.difference['clean'] == pytest.approx(reference.statistic, abs=1e-9)
    assert ours.p_value['clean']['two-sided'] == pytest.approx(reference.pvalue, abs=1e-12)
    for side in ('less', 'greater'):
        one_sided = stats.permutation_test(
            (_per_image(a), _per_image(b)), lambda x, y, axis: x.mean(axis) - y.mean(axis),
            permutation_type='samples', vectorized=True, n_resamples=np.inf,
            alternative=side)
        assert ours.p_value['clean'][side] == pytest.approx(one_sided.pvalue, abs=1e-12)


def test_random_paired_permutation_p_value_is_close_to_scipy_exact():
    rng = np.random.default_rng(1)
    a = rng.integers(300, 700, 16)
    b = np.clip(a + rng.integers(-60, 50, 16), 0, UNION)
    ours = paired_numbers({CLEAN: _stats(a)}, {CLEAN: _stats(b)}, [], permutations=20000,
                          resamples=200, permutation_seed=3)
    assert not ours.exact
    reference = stats.permutation_test(
        (_per_image(a), _per_image(b)), lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type='samples', vectorized=True, n_resamples=np.inf)
    assert abs(ours.p_value['clean']['two-sided'] - reference.pvalue) < 0.01


def test_ratio_metric_permutation_against_scipy_on_image_indices():
    """For an IoU ratio (sum I / sum U) scipy permutes the image pairs of a statistic
    that pools the swapped statistics: the same test, computed independently."""
    rng = np.random.default_rng(2)
    n = 9
    inter_a, inter_b = rng.integers(50, 400, n), rng.integers(50, 400, n)
    pred_a, pred_b = inter_a + rng.integers(0, 200, n), inter_b + rng.integers(0, 200, n)
    label = inter_a + rng.integers(0, 300, n) + 400
    label = np.maximum(label, np.maximum(inter_a, inter_b))
    a = ImageStats([f'{i}' for i in range(n)], SegmentationImageStats(
        np.stack([inter_a, pred_a, label], -1)[:, None]))
    b = ImageStats([f'{i}' for i in range(n)], SegmentationImageStats(
        np.stack([inter_b, pred_b, label], -1)[:, None]))
    ours = paired_numbers({CLEAN: a}, {CLEAN: b}, [], permutations=4096, resamples=100)
    table = np.concatenate([np.stack([inter_a, pred_a + label - inter_a], -1),
                            np.stack([inter_b, pred_b + label - inter_b], -1)])

    def statistic(x, y, axis):
        x, y = np.asarray(x, dtype=int), np.asarray(y, dtype=int)
        iou = lambda idx: table[idx, 0].sum(-1) / table[idx, 1].sum(-1) * 100  # noqa: E731
        return iou(x) - iou(y)

    reference = stats.permutation_test((np.arange(n), np.arange(n) + n), statistic,
                                       permutation_type='samples', vectorized=True,
                                       n_resamples=np.inf)
    assert ours.p_value['clean']['two-sided'] == pytest.approx(reference.pvalue, abs=1e-12)
    assert ours.difference['clean'] == pytest.approx(reference.statistic, abs=1e-9)


def test_permutation_p_values_of_undefined_numbers_are_nan():
    p = permutation_p_values(np.array([np.nan, 1.0]), np.zeros((10, 2)), exact=False)
    assert np.isnan(p['two-sided'][0]) and p['two-sided'][1] == pytest.approx(1 / 11 * 2)


def test_swap_masks_enumerate_small_sets_and_draw_large_ones():
    masks, exact = swap_masks(3, 100, 0)
    assert exact and masks.shape == (8, 3) and len({tuple(m) for m in masks}) == 8
    masks, exact = swap_masks(30, 100, 0)
    assert not exact and masks.shape == (100, 30)
    again, _ = swap_masks(30, 100, 0)
    assert np.array_equal(masks, again)


def test_kendall_tau_rows_equal_scipy():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 4, (50, 6)).astype(float)  # ties included
    y = rng.integers(0, 4, (50, 6)).astype(float)
    ours = kendall_tau_b_rows(x, y)
    for row, (a, b) in enumerate(zip(x, y)):
        expected = stats.kendalltau(a, b, variant='b').statistic
        if np.isnan(expected):
            assert np.isnan(ours[row])
        else:
            assert ours[row] == pytest.approx(expected, abs=1e-12)


def test_benjamini_hochberg_equals_scipy_and_keeps_nan():
    p = [0.01, 0.04, np.nan, 0.03, 0.5]
    adjusted = benjamini_hochberg(p)
    expected = stats.false_discovery_control([0.01, 0.04, 0.03, 0.5], method='bh')
    assert np.isnan(adjusted[2])
    assert np.allclose(adjusted[[0, 1, 3, 4]], expected)


def _flip_case(clean_gap, noise_gap, n=40, seed=0):
    """Model A ahead of B by ``clean_gap`` clean and by ``noise_gap`` under noise (per-image
    noise of a few points)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(300, 700, n)
    jitter = lambda: rng.integers(-5, 6, n)  # noqa: E731
    a = {CLEAN: _stats(base + clean_gap + jitter()), NOISE: _stats(base - 100 + jitter())}
    b = {CLEAN: _stats(base + jitter()), NOISE: _stats(base - 100 - noise_gap + jitter())}
    return paired_numbers(a, b, ['gaussian_noise'], permutations=1999, resamples=300)


def test_a_clear_rank_flip_is_detected():
    paired = _flip_case(clean_gap=60, noise_gap=-60)  # A ahead clean, B ahead under noise
    key = NOISE.key
    assert paired.difference['clean'] > 0 > paired.difference[key]
    p = flip_p_value(paired.p_value['clean'], paired.p_value[key],
                     paired.difference['clean'])
    assert p < 0.01


def test_a_flip_within_the_noise_is_not_significant():
    paired = _flip_case(clean_gap=1, noise_gap=-1, seed=1)
    key = NOISE.key
    p = flip_p_value(paired.p_value['clean'], paired.p_value[key],
                     paired.difference['clean'])
    assert p > 0.05


def test_paired_numbers_include_the_summary_with_paired_intervals():
    paired = _flip_case(clean_gap=30, noise_gap=30, seed=2)
    for name in ('clean', 'avg', 'delta_tp', 'mpc', 'rpc', 'gaussian_noise@mean', NOISE.key):
        assert name in paired.difference and name in paired.p_value
    low, high = paired.interval['clean']
    assert low <= paired.difference['clean'] <= high
    # both models lose the same under noise: ΔTP differs by ~0 with a tight interval
    low, high = paired.interval['delta_tp']
    assert low < 0.5 and high > -0.5 and high - low < 2


def test_models_of_other_images_are_refused_naming_them():
    a = {CLEAN: _stats([100, 200, 300])}
    b = {CLEAN: _stats([100, 200, 300], ids=['0.png', '1.png', 'x.png'])}
    with pytest.raises(ValueError, match=r"other images.*only in .*'2.png'.*'x.png'"):
        paired_numbers(a, b, [])
    with pytest.raises(ValueError, match='other conditions'):
        paired_numbers(a, {NOISE: _stats([1, 2, 3])}, [])


def test_the_smallest_p_value_and_what_the_report_says_of_it():
    """6 images: every one favours A, so the exact test is at its floor, 2/64, which scipy
    gives too; the report says that no difference can be marked after the correction
    and why the intervals (which exclude zero) disagree."""
    from reobench_mm.analysis.paired import smallest_p_value
    from reobench_mm.analysis.paired_models import PairedModels, _reach_lines
    a, b = [500, 510, 520, 530, 540, 550], [400, 405, 410, 415, 420, 425]
    paired = paired_numbers({CLEAN: _stats(a), NOISE: _stats(a)},
                            {CLEAN: _stats(b), NOISE: _stats(b)}, ['gaussian_noise'],
                            permutations=1999, resamples=200)
    reference = stats.permutation_test(
        (_per_image(a), _per_image(b)), lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type='samples', vectorized=True, n_resamples=np.inf)
    floor = smallest_p_value(6, True, 64)
    assert paired.p_value['clean']['two-sided'] == pytest.approx(reference.pvalue) == floor \
        == 2 / 64
    assert smallest_p_value(20, False, 1999) == pytest.approx(2 / 2000)
    names = ['clean', 'avg', 'delta_tp', 'gaussian_noise@mean']
    adjusted = dict(zip(names, benjamini_hochberg([paired.p_value[n]['two-sided']
                                                   for n in names])))
    result = PairedModels('B', {'A': paired}, {'A': adjusted}, {}, images=6,
                          permutations=paired.permutations, exact=True)
    text = ' '.join(_reach_lines(result, names))
    assert 'With 6 images the paired test cannot give p below 0.0312' in text
    assert 'a difference alone needs p ≤ 0.0125' in text and '8 images or more' in text
    assert 'marked only where many are as extreme (at best 0.125 alone)' in text
    assert 'without a mark' not in text  # three numbers at the floor: marked, as intervals
    strict = PairedModels('B', {'A': paired}, {'A': adjusted}, {}, images=6,
                          permutations=paired.permutations, exact=True, alpha=0.01)
    text = ' '.join(_reach_lines(strict, names))
    assert 'so no difference can be marked' in text
    assert '3 interval(s) exclude zero without a mark' in text
