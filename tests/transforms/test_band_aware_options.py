"""ApplyCorruption with per-band settings: full scales per band and the (η, σ) of the
Poisson-Gaussian noise per band, looked up in the sample's ``band_names``.

A float32 Sentinel-2 (× 10000) + Sentinel-1 (dB) sample: an optical-only corruption
leaves the dB bands bit-identical; one acting on them is refused naming the band;
``max_value`` by band name and ``band_noise`` (a mapping, ``'sensor'``) give the
engine's results for the same explicit per-band values; ``poisson_gaussian_noise`` acts
on every band (its band domain), the SAR ones included; bad settings are refused when
the step is built.
"""
import numpy as np
import pytest

import reobench_mm  # noqa: F401  (registration)
from reobench_corruptions import corrupt, get_corruption
from reobench_corruptions.band_noise import SENSOR_NOISE
from reobench_corruptions.bands import SENTINEL2_MSI_BANDS
from reobench_mm.transforms import ApplyCorruption
from reobench_mm.transforms.corruption import name_options

NAMES = tuple(SENTINEL2_MSI_BANDS) + ('VV', 'VH')
OPTICAL, SAR = list(range(13)), [13, 14]
PATH, KEY = '/data/s2s1/tile_12.tif', 'tile_12.tif'


def _sample(sar_in_db: bool = True) -> dict:
    rng = np.random.default_rng(21)
    optical = rng.integers(0, 10001, (30, 26, 13)).astype(np.float32)
    db = rng.uniform(-25.0, 5.0, (30, 26, 2)).astype(np.float32)
    sar = db if sar_in_db else (10 ** (db / 10)).astype(np.float32)
    image = np.concatenate([optical, sar], axis=2)
    return dict(img=image, img_path=PATH, band_names=NAMES, ori_shape=image.shape[:2])


def _apply(sample, corruption, severity=3, protocol='reobench', **options):
    step = ApplyCorruption(corruption, severity, seed=2, protocol=protocol, **options)
    return step(dict(sample, img=sample['img'].copy()))['img']


@pytest.mark.parametrize('corruption', ['haze', 'cloud'])
def test_optical_corruptions_leave_sar_in_db_bit_identical(corruption):
    sample = _sample()
    out = _apply(sample, corruption, max_value=10000)
    np.testing.assert_array_equal(out[..., SAR], sample['img'][..., SAR])
    np.testing.assert_array_equal(
        out[..., OPTICAL], corrupt(np.ascontiguousarray(sample['img'][..., OPTICAL]),
                                   corruption, 3, seed=2, key=KEY, max_value=10000))


@pytest.mark.parametrize('corruption,protocol', [('gaussian_noise', 'reobench'),
                                                 ('poisson_gaussian_noise',
                                                  'geofm_calibration')])
def test_a_corruption_acting_on_sar_in_db_is_refused_naming_the_band(corruption, protocol):
    sample = _sample()
    with pytest.raises(ValueError, match=r'Bands outside their range: band 13 \(VV\) in '
                                         r'\[-2\d\.\d+, \d\.\d+\]; band 14 \(VH\) in'):
        _apply(sample, corruption, protocol=protocol, max_value=10000)
    # the explicit selection of a SAR band: the per-band message
    with pytest.raises(ValueError, match=r'^band 14 \(VH\) has values in \[-2\d\.\d+, '
                                         r'\d\.\d+\], outside its valid range \[0, 10000\.0\]'):
        _apply(sample, corruption, protocol=protocol, max_value=10000,
               corruption_options={corruption: dict(bands=[0, 14])})


def test_full_scales_by_band_name():
    sample = _sample(sar_in_db=False)  # linear power, 0.003..3.2
    by_name = dict({name: 10000 for name in NAMES[:13]}, VV=4, VH=4)
    listed = [10000] * 13 + [4, 4]
    for corruption in ('gaussian_noise', 'rotate'):
        out = _apply(sample, corruption, max_value=by_name)
        expected = corrupt(sample['img'], corruption, 3, seed=2, key=KEY, max_value=listed)
        np.testing.assert_array_equal(out, expected)
    assert (out[..., SAR] <= 4).all() and (out[..., SAR] != sample['img'][..., SAR]).any()
    without_names = dict(sample, band_names=None)
    with pytest.raises(ValueError, match=r"max_value is given by band name .* needs the "
                                         r"image's band names"):
        _apply(without_names, 'haze', max_value=by_name)


def test_noise_parameters_per_band():
    sample = _sample(sar_in_db=False)
    by_name = dict({name: 10000 for name in NAMES[:13]}, VV=4, VH=4)
    settings = dict(protocol='geofm_calibration', max_value=by_name)
    plain = _apply(sample, 'poisson_gaussian_noise', **settings)
    # the band domain of poisson_gaussian_noise is 'all': every band is noised
    assert get_corruption('poisson_gaussian_noise', 'geofm_calibration').band_domain == 'all'
    assert all((plain[..., b] != sample['img'][..., b]).mean() > 0.5 for b in range(15))
    sensor = _apply(sample, 'poisson_gaussian_noise', **settings,
                    corruption_options=dict(poisson_gaussian_noise=dict(band_noise='sensor')))
    explicit = [SENSOR_NOISE['optical']] * 13 + [SENSOR_NOISE['sar']] * 2
    np.testing.assert_array_equal(sensor, corrupt(
        sample['img'], 'poisson_gaussian_noise', 3, seed=2, key=KEY,
        protocol='geofm_calibration', max_value=[10000] * 13 + [4, 4], band_noise=explicit))
    # the SAR bands' shot noise a tenth of the default's in standard deviation
    spread = [np.std(out[..., SAR] - sample['img'][..., SAR]) for out in (plain, sensor)]
    assert spread[1] < 0.5 * spread[0], spread
    mapping = _apply(sample, 'poisson_gaussian_noise', **settings, corruption_options=dict(
        poisson_gaussian_noise=dict(band_noise={'vv': (100, 1), 'VH': (100.0, 1.0)})))
    np.testing.assert_array_equal(mapping, sensor)


def test_bad_settings_are_refused_when_the_step_is_built():
    with pytest.raises(ValueError, match=r"band_noise must be None .* 'sensor'"):
        ApplyCorruption('poisson_gaussian_noise', 2, protocol='geofm_calibration',
                        corruption_options=dict(poisson_gaussian_noise=dict(band_noise='s1')))
    with pytest.raises(ValueError, match=r"valid: \['band_noise', 'bands'\]|'band_noise', "
                                         r"'bands'"):
        ApplyCorruption('haze', 2, corruption_options=dict(
            poisson_gaussian_noise=dict(noise=[(1, 1)])))
    with pytest.raises(ValueError, match=r'max_value\[1\]: max_value must be None or a finite'):
        ApplyCorruption('haze', 2, max_value=[1.0, 0.0])
    with pytest.raises(ValueError, match=r'reencode_jpeg_quality .* takes a max_value of one '
                                         r'number'):
        ApplyCorruption('haze', 2, max_value={'VV': 4.0}, reencode_jpeg_quality=75)


def test_name_options():
    assert name_options(None, 3, None, {}) == {}
    assert name_options(['R', 'G', 'B'], 3, None, {}) == {'band_names': ('R', 'G', 'B')}
    assert name_options(['VV'], 3, None, {}) == {}  # names of another length: as before
    assert name_options(['VV'], 3, None, {'band_noise': 'sensor'}) == {'band_names': ('VV', )}
    assert name_options(['VV'], 3, {'VV': 1.0}, {}) == {'band_names': ('VV', )}
