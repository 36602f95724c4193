"""Per-band (η, σ) of the calibration study's Poisson-Gaussian noise (``band_noise``).

- numpy engine: every band against a direct numpy computation of
  ``Poisson(η_b·x)/η_b + σ_b·ε`` drawn from the sample's generator (whole-image draws:
  every photon count in order, then every read noise), bit-exact, for float32, uint16 and
  uint8 images (the uint8 kernel included) and with tiny tiles;
- without ``band_noise`` (or with every multiplier 1) the same bits as the severity's
  single pair;
- the mapping by band name and ``'sensor'`` (the table by band kind) equal the explicit
  per-band pairs they stand for;
- torch engine (its own draws): each band's residual mean and variance against the numpy
  engine's within 5 standard errors; the same test with the bands' pairs swapped fails;
- refusals name what is wrong and what is valid.
"""
import numpy as np
import pytest

import reobench_corruptions.base as engine_base
from reobench_corruptions import corrupt, get_corruption, make_rng
from reobench_corruptions.band_noise import (MAX_PHOTON_SCALE, SENSOR_NOISE, band_noise_parameters,
                                             check_band_noise, resolve_band_noise)

NAME, PROTOCOL = 'poisson_gaussian_noise', 'geofm_calibration'
KEY, SEED = 'scene_17.tif', 5
#: four bands with their own multipliers: the severity's pair, more photons and less read
#: noise, fewer photons and more read noise, a SAR-like band (shot noise a tenth)
PAIRS = [(1.0, 1.0), (4.0, 0.5), (0.25, 2.0), (100.0, 1.0)]
NAMES = ['B04', 'B08', 'B11', 'VV']


def _image(shape, dtype, scale):
    """Smooth values in 10..90 % of the full scale, a different pattern per band."""
    rng = np.random.default_rng(11)
    h, w, c = shape
    rows, cols = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing='ij')
    bands = [0.5 + 0.4 * np.sin(3 * rows + 2 * cols + k) * np.cos(2 * rows - k)
             for k in range(c)]
    values = np.stack(bands, axis=2) + 0.02 * rng.standard_normal((h, w, c))
    values = np.clip(values, 0.1, 0.9) * scale
    return np.rint(values).astype(dtype) if np.dtype(dtype).kind == 'u' \
        else values.astype(dtype)


def _formula(x01: np.ndarray, severity: int, pairs) -> np.ndarray:
    """``Poisson(η_b·x)/η_b + σ_b·ε`` per band, float32 before clipping: the photon
    counts of the whole image drawn first (element order), then the read noise, from the
    sample's generator; each band computed on its own."""
    eta, sigma = get_corruption(NAME, PROTOCOL).parameter_for(severity)
    rng = make_rng(SEED, f'{PROTOCOL}/{NAME}', severity, KEY)
    x = x01.astype(np.float64)
    etas = np.array([eta * a for a, _ in pairs])
    sigmas = np.array([sigma * c for _, c in pairs])
    counts = rng.poisson(x * etas)
    noise = rng.standard_normal(x.shape)
    out = np.empty(x.shape, np.float32)
    for b in range(x.shape[2]):
        out[..., b] = (counts[..., b] / etas[b] + sigmas[b] * noise[..., b]).astype(np.float32)
    return out


def _to_dtype(values: np.ndarray, dtype, scale: float) -> np.ndarray:
    """Clip to [0, 1] and round to the integer grid of ``scale`` (float32 products)."""
    clipped = np.clip(values, 0, 1) * np.float32(scale)
    return np.rint(clipped).astype(dtype)


def _noisy(image, severity=3, **options):
    return corrupt(image, NAME, severity, protocol=PROTOCOL, key=KEY, seed=SEED, **options)


@pytest.mark.parametrize('elements', [10**9, 37])
@pytest.mark.parametrize('severity', [1, 3, 5])
def test_each_band_follows_the_formula_bit_exact(monkeypatch, severity, elements):
    monkeypatch.setattr(engine_base, 'TILE_ELEMENTS', elements)  # many tiles at 37
    floats = _image((23, 17, 4), np.float32, 1.0)
    out = _noisy(floats, severity, band_noise=PAIRS)
    expected = np.clip(_formula(floats, severity, PAIRS), 0, 1)
    for b in range(4):
        np.testing.assert_array_equal(out[..., b], expected[..., b], err_msg=f'band {b}')
    # uint16 (12-bit full scale) and uint8 (its own kernel): the same draws, rounded
    deep = _image((23, 17, 4), np.uint16, 4095)
    x = deep.astype(np.float32) * np.float32(1 / 4095)
    np.testing.assert_array_equal(_noisy(deep, severity, band_noise=PAIRS, max_value=4095),
                                  _to_dtype(_formula(x, severity, PAIRS), np.uint16, 4095))
    grey = _image((23, 17, 4), np.uint8, 255)
    x = grey.astype(np.float32) * np.float32(1 / 255)
    np.testing.assert_array_equal(_noisy(grey, severity, band_noise=PAIRS),
                                  _to_dtype(_formula(x, severity, PAIRS), np.uint8, 255))


@pytest.mark.parametrize('dtype,scale', [(np.float32, 1.0), (np.uint8, 255), (np.uint16, 65535)])
def test_without_band_noise_the_bits_are_unchanged(dtype, scale):
    """No option, or every multiplier 1: the severity's single (η, σ) on every band, the
    formula with one pair."""
    image = _image((19, 21, 3), dtype, scale)
    default = _noisy(image)
    x = image.astype(np.float32) * np.float32(1 / scale) if scale != 1.0 else image
    expected = _formula(x, 3, [(1.0, 1.0)] * 3)
    if dtype == np.float32:
        np.testing.assert_array_equal(default, np.clip(expected, 0, 1))
    else:
        np.testing.assert_array_equal(default, _to_dtype(expected, dtype, scale))
    np.testing.assert_array_equal(_noisy(image, band_noise=[(1, 1)] * 3), default)
    np.testing.assert_array_equal(_noisy(image, band_noise=None), default)
    eta, sigma = band_noise_parameters((50, 0.02), None, 3)
    assert (eta, sigma) == (50, 0.02)


def test_a_mapping_by_band_name_and_the_sensor_table():
    image = _image((16, 18, 4), np.float32, 1.0)
    explicit = _noisy(image, band_noise=PAIRS)
    by_name = {'b08': (4.0, 0.5), ' B11 ': (0.25, 2.0), 'VV': (100.0, 1.0)}  # B04 left out
    np.testing.assert_array_equal(_noisy(image, band_noise=by_name, band_names=NAMES),
                                  explicit)
    # 'sensor': optical bands the severity's pair, SAR bands η × 100
    assert SENSOR_NOISE == {'optical': (1.0, 1.0), 'sar': (100.0, 1.0), 'unknown': (1.0, 1.0)}
    assert resolve_band_noise('sensor', 4, NAMES) == ((1.0, 1.0), ) * 3 + ((100.0, 1.0), )
    assert resolve_band_noise('sensor', 2, ['DEM', None]) == ((1.0, 1.0), ) * 2
    sensor = _noisy(image, band_noise='sensor', band_names=NAMES)
    np.testing.assert_array_equal(
        sensor, _noisy(image, band_noise=[(1, 1), (1, 1), (1, 1), (100, 1)]))
    np.testing.assert_array_equal(sensor[..., 3], np.clip(_formula(
        image, 3, [(1, 1)] * 3 + [(100, 1)]), 0, 1)[..., 3])
    # the SAR band's residual: the shot noise a tenth in standard deviation
    eta, sigma = get_corruption(NAME, PROTOCOL).parameter_for(3)
    residual = (sensor - image).astype(np.float64)
    expected_var = image.astype(np.float64).mean(axis=(0, 1)) / (eta * np.array([1, 1, 1, 100]))
    expected_var += sigma**2
    measured = residual.var(axis=(0, 1))
    np.testing.assert_allclose(measured, expected_var, rtol=0.25)


def test_band_noise_with_a_band_selection():
    """``bands`` picks the bands noised; ``band_noise`` still gives one pair per band of
    the image; the picked bands are those of the all-band result."""
    image = _image((14, 15, 4), np.uint16, 65535)
    full = _noisy(image, band_noise=PAIRS)
    out = _noisy(image, band_noise=PAIRS, bands=[1, 3])
    np.testing.assert_array_equal(out[..., [0, 2]], image[..., [0, 2]])
    np.testing.assert_array_equal(out[..., [1, 3]], full[..., [1, 3]])


@pytest.mark.parametrize('band_noise,options,match', [
    ('satellite', {}, r"band_noise must be None \(the severity's η and σ on every band\), "
                      r"'sensor'"),
    ([], {}, r'band_noise must be'),
    (7, {}, r'band_noise must be'),
    ([(1, 1)] * 3, {}, r'band_noise lists 3 pairs but the image has 4 bands'),
    ([(1, 1), (0, 1), (1, 1), (1, 1)], {}, r'band_noise\[1\]: the η multiplier must be a '
                                           r'finite number > 0, got 0'),
    ([(1, 1), (1, -0.5), (1, 1), (1, 1)], {}, r'the σ multiplier must be a finite number '
                                              r'>= 0 \(0: no read noise\), got -0\.5'),
    ([(1, 1), (1, 1, 1), (1, 1), (1, 1)], {}, r'band_noise\[1\] must be an \(η multiplier, '
                                              r'σ multiplier\) pair'),
    ([(1, 1), ('2', 1), (1, 1), (1, 1)], {}, r'pair of numbers'),
    ({'B05': (2, 1)}, dict(band_names=NAMES), r"band_noise names the band 'B05', which this "
                                              r"image does not have; its bands are \['B04'"),
    ({'B04': (2, 1)}, {}, r"band_noise is given by band name \(\['B04'\]\), so it needs the "
                          r"image's band names: pass band_names="),
    ('sensor', {}, r"band_noise='sensor' looks each band's kind up by its name"),
    ({4: (2, 1)}, {}, r'maps band names \(strings\) to pairs, got the key 4'),
    ('sensor', dict(band_names=NAMES[:3]), r'band_names name 3 bands .* but the image has 4'),
])
@pytest.mark.parametrize('severity', [0, 3])
def test_refusals(band_noise, options, match, severity):
    image = _image((8, 9, 4), np.float32, 1.0)
    with pytest.raises(ValueError, match=match):
        _noisy(image, severity, band_noise=band_noise, **options)


def test_more_refusals():
    image = _image((8, 9, 4), np.float32, 1.0)
    big = MAX_PHOTON_SCALE / 200 * 2  # η 200 at severity 1
    with pytest.raises(ValueError, match=r'band_noise gives band 2 η = 8388608\.0 .*above '
                                         r'4\.1943e\+06'):
        _noisy(image, 1, band_noise=[(1, 1), (1, 1), (big, 1), (1, 1)])
    with pytest.raises(TypeError, match=r"haze got unknown options \['band_noise'\]"):
        corrupt(image, 'haze', 2, band_noise=PAIRS)
    with pytest.raises(TypeError, match=r"single string 'VV'"):
        _noisy(image, band_noise='sensor', band_names='VV')
    assert check_band_noise(np.ones((4, 2))) is not None  # an N×2 array is a list of pairs


# ------------------------------------------------------------------ the torch engine

def _moment_z(a: np.ndarray, b: np.ndarray):
    """z-scores of the differences of the means and of the variances of two samples of
    independent values (standard errors from each sample's own moments)."""
    z = []
    for moment in ('mean', 'variance'):
        estimates, errors = [], []
        for x in (a, b):
            mean, variance = x.mean(), x.var()
            if moment == 'mean':
                estimates.append(mean)
                errors.append(variance / x.size)
            else:
                estimates.append(variance)
                errors.append((np.mean((x - mean)**4) - variance**2) / x.size)
        z.append(abs(estimates[0] - estimates[1]) / np.sqrt(sum(errors)))
    return z


@pytest.mark.parametrize('severity', [2, 4])
def test_torch_engine_has_each_bands_statistics(severity):
    """Per band, the residual (noisy − clean) of the torch engine has the numpy engine's
    mean and variance (z < 5); against the numpy engine with two bands' pairs swapped at
    least one z is far above (so the comparison can fail)."""
    torch = pytest.importorskip('torch')
    from reobench_corruptions.torch_engine import corrupt_torch
    images = np.stack([_image((96, 96, 4), np.float32, 1.0)[..., ::-1] * (1 - 0.1 * i)
                       for i in range(3)])
    keys = ['a.tif', 'b.tif', 'c.tif']
    got = corrupt_torch(torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2))),
                        NAME, severity, keys=keys, protocol=PROTOCOL, band_noise='sensor',
                        band_names=['B02', 'VH', 'B12', 'VV']).numpy().transpose(0, 2, 3, 1)
    pairs = [(1, 1), (100, 1), (1, 1), (100, 1)]

    def numpy_engine(band_pairs):
        return np.stack([corrupt(images[i], NAME, severity, protocol=PROTOCOL, key=key,
                                 band_noise=band_pairs) for i, key in enumerate(keys)])

    expected = numpy_engine(pairs)
    swapped = numpy_engine([pairs[1], pairs[0], pairs[3], pairs[2]])
    clean = images.astype(np.float64)
    for b in range(4):
        torch_residual = got[..., b] - clean[..., b]
        z = _moment_z(torch_residual, expected[..., b] - clean[..., b])
        print(f'severity {severity} band {b}: z(mean) {z[0]:.2f}, z(variance) {z[1]:.2f}')
        assert max(z) < 5.0, (b, z)
        z_wrong = _moment_z(torch_residual, swapped[..., b] - clean[..., b])
        assert max(z_wrong) > 15.0, (b, z_wrong)
    # without band_noise: the severity's pair on every band, as before
    plain = corrupt_torch(torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2))),
                          NAME, severity, keys=keys, protocol=PROTOCOL)
    again = corrupt_torch(torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2))),
                          NAME, severity, keys=keys, protocol=PROTOCOL,
                          band_noise=[(1, 1)] * 4)
    assert torch.equal(plain, again)
