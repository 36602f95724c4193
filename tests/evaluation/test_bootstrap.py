"""Bootstrap resamples of a test set and their percentile intervals: the draws, the
interval against ``scipy.stats.bootstrap``, the coverage of the interval on simulated
test sets (a mean and an IoU-type ratio), and what non-finite replicates do."""
import inspect
import math

import numpy as np
import pytest
from scipy import stats

from reobench_mm.evaluation.functional.bootstrap import (MIN_FINITE_FRACTION,
                                                         percentile_interval,
                                                         resample_counts)
from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats

LEVEL = 0.95
#: simulated test sets per coverage check; the Monte-Carlo standard error of a 95 %
#: coverage over them is about 0.5 %, and the band below is about +-3 of those
COVERAGE_SETS = 2000
COVERAGE_BAND = (0.935, 0.965)
COVERAGE_RESAMPLES = 1000
COVERAGE_IMAGES = 400


def scipy_rng_keyword(generator):
    """``scipy.stats.bootstrap``'s random-state keyword of the installed SciPy (``rng``
    since 1.15, ``random_state`` before)."""
    name = 'rng' if 'rng' in inspect.signature(stats.bootstrap).parameters \
        else 'random_state'
    return {name: generator}


# ----------------------------------------------------------------------------------
# resample_counts
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize('num_images,resamples', [(1, 5), (7, 1), (50, 200), (2016, 3)])
def test_counts_shape_dtype_and_row_sums(num_images, resamples):
    counts = resample_counts(num_images, resamples, seed=3)
    assert counts.shape == (resamples, num_images)
    assert counts.dtype == np.int32
    assert counts.min() >= 0
    np.testing.assert_array_equal(counts.sum(axis=1), np.full(resamples, num_images))


def test_counts_are_draws_with_replacement():
    """Each row is N draws of the N images: the rows are the histograms of
    ``default_rng(seed).integers(0, N, (B, N))``, and an image is drawn about once per
    resample on average (a multinomial: mean 1, variance 1 - 1/N)."""
    n, b, seed = 40, 3000, 11
    counts = resample_counts(n, b, seed)
    draws = np.random.default_rng(seed).integers(0, n, size=(b, n), dtype=np.int64)
    expected = np.stack([np.bincount(row, minlength=n) for row in draws])
    np.testing.assert_array_equal(counts, expected)
    assert abs(counts.mean() - 1.0) < 1e-12
    assert abs(counts.var() - (1 - 1 / n)) < 0.03
    # every image is left out of a resample with probability (1 - 1/N)^N ~ 0.363
    assert abs((counts == 0).mean() - (1 - 1 / n) ** n) < 0.01


def test_counts_same_seed_same_bits_other_seed_other_rows():
    a = resample_counts(300, 50, seed=7)
    b = resample_counts(300, 50, seed=7)
    assert a.tobytes() == b.tobytes()
    c = resample_counts(300, 50, seed=8)
    assert not np.array_equal(a, c)
    # more resamples of the same seed continue the same stream: the first rows are kept
    np.testing.assert_array_equal(resample_counts(300, 80, seed=7)[:50], a)


def test_zero_resamples_give_no_rows():
    counts = resample_counts(5, 0, seed=0)
    assert counts.shape == (0, 5) and counts.dtype == np.int32


@pytest.mark.parametrize('num_images,resamples', [
    (0, 10), (-3, 10), (True, 10), (2.0, 10), ('5', 10),
    (5, -1), (5, True), (5, False), (5, 1.5), (5, None)])
def test_counts_reject_bad_sizes(num_images, resamples):
    with pytest.raises(ValueError):
        resample_counts(num_images, resamples, seed=0)


# ----------------------------------------------------------------------------------
# percentile_interval against numpy and scipy
# ----------------------------------------------------------------------------------
def test_interval_is_the_percentiles_of_the_replicates():
    rng = np.random.default_rng(0)
    sample = rng.gamma(2.0, 3.0, size=250)
    counts = resample_counts(len(sample), 4000, seed=5)
    means = counts @ sample / len(sample)
    for level in (0.95, 0.9, 0.5):
        low, high = percentile_interval(means, level)
        alpha = (1 - level) / 2
        assert low == pytest.approx(np.percentile(means, 100 * alpha), rel=1e-14)
        assert high == pytest.approx(np.percentile(means, 100 * (1 - alpha)), rel=1e-14)
        assert low < sample.mean() < high


def test_interval_along_an_axis():
    rng = np.random.default_rng(1)
    replicates = rng.normal(size=(3, 500, 4))
    low, high = percentile_interval(replicates, 0.9, axis=1)
    assert low.shape == high.shape == (3, 4)
    # (the same quantiles; the axis order may change the last bit of the interpolation)
    np.testing.assert_allclose(low, np.percentile(replicates, 5, axis=1), rtol=1e-14)
    np.testing.assert_allclose(high, np.percentile(replicates, 95, axis=1), rtol=1e-14)
    low0, _ = percentile_interval(np.moveaxis(replicates, 1, 0))
    np.testing.assert_allclose(low0, np.percentile(replicates, 2.5, axis=1), rtol=1e-14)


def test_interval_equals_scipy_with_the_same_resamples():
    """``scipy.stats.bootstrap`` draws its resamples with ``rng.integers(0, n, (B, n))``
    too: given a generator of the same seed it resamples the same images, and its
    percentile interval of the mean is the interval of the count rows."""
    rng = np.random.default_rng(4)
    sample = rng.lognormal(0.0, 0.8, size=300)
    seed, b = 123, 2000
    means = resample_counts(len(sample), b, seed) @ sample / len(sample)
    low, high = percentile_interval(means, LEVEL)
    result = stats.bootstrap((sample, ), np.mean, n_resamples=b, method='percentile',
                             confidence_level=LEVEL, vectorized=True,
                             **scipy_rng_keyword(np.random.default_rng(seed)))
    np.testing.assert_allclose(np.sort(result.bootstrap_distribution), np.sort(means),
                               rtol=1e-12)
    np.testing.assert_allclose([low, high], [result.confidence_interval.low,
                                             result.confidence_interval.high], rtol=1e-12)


def test_interval_agrees_with_scipy_on_other_resamples():
    """Independent resamples (scipy's own, 20,000 of them) give the same interval up to
    Monte-Carlo error."""
    rng = np.random.default_rng(9)
    sample = rng.exponential(2.0, size=300)
    seed = 2024
    means = resample_counts(len(sample), 20000, seed) @ sample / len(sample)
    low, high = percentile_interval(means, LEVEL)
    result = stats.bootstrap((sample, ), np.mean, n_resamples=20000, method='percentile',
                             confidence_level=LEVEL, vectorized=True,
                             random_state=seed)
    tolerance = 0.05 * sample.std()
    assert abs(low - result.confidence_interval.low) < tolerance
    assert abs(high - result.confidence_interval.high) < tolerance
    # and the interval is the usual width: about 2 x 1.96 standard errors of the mean
    width = 2 * 1.96 * sample.std() / math.sqrt(len(sample))
    assert abs((high - low) - width) < 0.1 * width


# ----------------------------------------------------------------------------------
# Coverage on simulated test sets
# ----------------------------------------------------------------------------------
def coverage(population_draw, interval_of, true_value, seed):
    """Fraction of ``COVERAGE_SETS`` simulated test sets whose interval covers
    ``true_value``; set ``s`` is ``population_draw(rng)`` and its interval
    ``interval_of(set, counts)``.

    Every set is resampled with the same counts, as the package resamples every run with
    its one fixed seed: the coverage measured is that of the interval users get. (Drawing
    the counts anew per set gave the same coverage, 94.65 % and 94.25 % here against
    94.50 % and 94.50 %, in six times the time.)"""
    rng = np.random.default_rng(seed)
    counts = resample_counts(COVERAGE_IMAGES, COVERAGE_RESAMPLES, seed=10_000 + seed)
    hits = 0
    for _ in range(COVERAGE_SETS):
        test_set = population_draw(rng)
        low, high = interval_of(test_set, counts)
        assert low < high
        hits += bool(low <= true_value <= high)
    return hits / COVERAGE_SETS


def test_coverage_of_a_mean():
    """Per-image values of a skewed population (gamma, skewness 1.4): the 95 % interval
    of the test-set mean covers the population mean in 93.5-96.5 % of 2,000 sets."""
    population = np.random.default_rng(100).gamma(2.0, 1.0, size=200_000)
    true_mean = population.mean()

    def draw(rng):
        return population[rng.integers(0, len(population), COVERAGE_IMAGES)]

    def interval(values, counts):
        return percentile_interval(counts @ values / len(values), LEVEL)

    covered = coverage(draw, interval, true_mean, seed=101)
    print(f'coverage of the mean: {covered:.4f}')
    assert COVERAGE_BAND[0] <= covered <= COVERAGE_BAND[1], covered


def iou_population(size, seed):
    """Per-image (intersection, prediction, label) pixel counts of one class."""
    rng = np.random.default_rng(seed)
    label = np.round(rng.gamma(6.0, 4000.0, size)).astype(np.int64)
    intersection = rng.binomial(label, rng.beta(4.0, 2.0, size))
    false_positive = np.round(rng.gamma(6.0, 800.0, size)).astype(np.int64)
    return np.stack([intersection, intersection + false_positive, label], axis=-1)


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_coverage_of_an_iou_ratio():
    """IoU = sum(intersection) / sum(union) over the images of a set: the 95 % interval
    of ``SegmentationImageStats.values`` covers the population's E[I] / E[U] in
    93.5-96.5 % of 2,000 sets."""
    population = iou_population(100_000, seed=200)
    intersection, pred, label = population.T
    true_iou = 100.0 * intersection.sum() / (pred + label - intersection).sum()

    def draw(rng):
        return population[rng.integers(0, len(population), COVERAGE_IMAGES)]

    def interval(areas, counts):
        image_stats = SegmentationImageStats(areas[:, None, :])
        values = image_stats.values(counts)
        assert values.shape == (COVERAGE_RESAMPLES, )
        return percentile_interval(values, LEVEL)

    covered = coverage(draw, interval, true_iou, seed=201)
    print(f'coverage of the IoU: {covered:.4f}')
    assert COVERAGE_BAND[0] <= covered <= COVERAGE_BAND[1], covered


def test_coverage_check_detects_a_too_narrow_interval():
    """The coverage check has power: a 70 % interval, or resamples of half the images
    (an interval about 1.4 x too narrow), falls far below the band."""
    population = np.random.default_rng(300).gamma(2.0, 1.0, size=50_000)
    rng = np.random.default_rng(301)
    hits_narrow = hits_half = 0
    sets = 400
    for s in range(sets):
        values = population[rng.integers(0, len(population), COVERAGE_IMAGES)]
        counts = resample_counts(COVERAGE_IMAGES, 400, seed=s)
        low, high = percentile_interval(counts @ values / len(values), 0.7)
        hits_narrow += bool(low <= population.mean() <= high)
        doubled = np.concatenate([values, values])
        counts = resample_counts(len(doubled), 400, seed=s)
        low, high = percentile_interval(counts @ doubled / len(doubled), LEVEL)
        hits_half += bool(low <= population.mean() <= high)
    assert hits_narrow / sets < 0.8
    assert hits_half / sets < COVERAGE_BAND[0] - 0.03


# ----------------------------------------------------------------------------------
# Non-finite replicates
# ----------------------------------------------------------------------------------
def test_nan_replicates_are_left_out():
    rng = np.random.default_rng(5)
    values = rng.normal(size=1000)
    with_nan = values.copy()
    with_nan[rng.choice(1000, 60, replace=False)] = np.nan
    with_nan[:3] = np.inf  # any non-finite value counts as missing
    finite = with_nan[np.isfinite(with_nan)]
    low, high = percentile_interval(with_nan, LEVEL)
    assert low == pytest.approx(np.percentile(finite, 2.5), rel=1e-14)
    assert high == pytest.approx(np.percentile(finite, 97.5), rel=1e-14)
    # leaving them out matters: with the NaNs read as 0 the interval is another one
    assert low != pytest.approx(np.percentile(np.nan_to_num(with_nan, posinf=0), 2.5),
                                rel=1e-6)


def test_too_many_nan_replicates_give_nan():
    values = np.arange(1000, dtype=float)
    # exactly the least finite fraction allowed still gives an interval
    at_limit = values.copy()
    at_limit[:round(1000 * (1 - MIN_FINITE_FRACTION))] = np.nan
    low, high = percentile_interval(at_limit, LEVEL)
    assert math.isfinite(low) and math.isfinite(high)
    beyond = values.copy()
    beyond[:round(1000 * (1 - MIN_FINITE_FRACTION)) + 1] = np.nan
    low, high = percentile_interval(beyond, LEVEL)
    assert math.isnan(low) and math.isnan(high)
    low, high = percentile_interval(np.full(50, np.nan), LEVEL)
    assert math.isnan(low) and math.isnan(high)


def test_nan_is_decided_per_column():
    values = np.random.default_rng(6).normal(size=(1000, 3))
    values[:50, 0] = np.nan    # 5 %: interval of the finite ones
    values[:150, 1] = np.nan   # 15 %: NaN
    low, high = percentile_interval(values, LEVEL)
    assert low[0] == pytest.approx(np.percentile(values[50:, 0], 2.5), rel=1e-14)
    assert high[0] == pytest.approx(np.percentile(values[50:, 0], 97.5), rel=1e-14)
    assert math.isnan(low[1]) and math.isnan(high[1])
    assert low[2] == pytest.approx(np.percentile(values[:, 2], 2.5), rel=1e-14)


def test_no_replicates_give_nan():
    low, high = percentile_interval(np.zeros((0, 2)), LEVEL)
    assert low.shape == (2, ) and np.isnan(low).all() and np.isnan(high).all()


@pytest.mark.parametrize('level', [0, 1, 1.5, -0.1, True, '0.95', None])
def test_bad_levels_are_rejected(level):
    with pytest.raises(ValueError):
        percentile_interval(np.arange(10.0), level)
