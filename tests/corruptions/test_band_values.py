"""Value ranges per band (``reobench_corruptions.band_values``), in both engines.

A float32 stack of 13 Sentinel-2 bands (reflectance × 10000, "uint16-like") and 2
Sentinel-1 bands in dB (negative values): an optical-only corruption on the optical bands
leaves the SAR bands bit-identical and gives the optical ones the formula's values; a
corruption acting on the SAR bands with a full scale that does not fit them is refused,
naming the band, its values and the valid range. Full scales per band (a list, or a
mapping by band name) scale each band by its own full scale (against a direct numpy
computation), and are refused where they do not fit the image.
"""
import numpy as np
import pytest

from reobench_corruptions import corrupt, corrupt_geometric, make_rng
from reobench_corruptions.band_values import (by_band_name, check_band_max_values,
                                              needs_band_names, per_band_full_scales)
from reobench_corruptions.bands import SENTINEL2_MSI_BANDS

NAMES = list(SENTINEL2_MSI_BANDS) + ['VV', 'VH']
OPTICAL, SAR = list(range(13)), [13, 14]
KEY = 'S2_S1_tile.tif'


def _stack(shape=(24, 28)) -> np.ndarray:
    """13 Sentinel-2 bands in 0..10000 (whole numbers, float32) and VV, VH in dB."""
    rng = np.random.default_rng(3)
    optical = rng.integers(0, 10001, (*shape, 13)).astype(np.float32)
    sar = rng.uniform(-25.0, 5.0, (*shape, 2)).astype(np.float32)
    return np.concatenate([optical, sar], axis=2)


def _haze(x: np.ndarray, scale: float, intensity: float) -> np.ndarray:
    """Haze ``x·(1 − I) + I`` on ``x / scale`` in float32, back to the full scale."""
    y = x * np.float32(1 / scale)
    y = y * np.float32(1 - intensity) + np.float32(intensity)
    return np.minimum(np.clip(y, 0, 1) * np.float32(scale), np.float32(scale))


def test_an_optical_corruption_leaves_sar_in_db_bit_identical():
    image = _stack()
    for name in ('haze', 'cloud'):
        out = corrupt(image, name, 3, key=KEY, max_value=10000, bands=OPTICAL)
        assert out.dtype == np.float32 and out.shape == image.shape
        np.testing.assert_array_equal(out[..., SAR], image[..., SAR])
        assert (out[..., OPTICAL] != image[..., OPTICAL]).mean() > 0.2, name
        # the optical bands are those of the optical image alone
        alone = corrupt(np.ascontiguousarray(image[..., OPTICAL]), name, 3, key=KEY,
                        max_value=10000)
        np.testing.assert_array_equal(out[..., OPTICAL], alone)
    out = corrupt(image, 'haze', 3, key=KEY, max_value=10000, bands=OPTICAL)
    np.testing.assert_array_equal(out[..., OPTICAL], _haze(image[..., OPTICAL], 10000, 0.4))
    # names change nothing in the result
    np.testing.assert_array_equal(
        corrupt(image, 'haze', 3, max_value=10000, bands=OPTICAL, band_names=NAMES), out)


@pytest.mark.parametrize('name,protocol', [('gaussian_noise', 'reobench'),
                                           ('poisson_gaussian_noise', 'geofm_calibration'),
                                           ('haze', 'reobench')])
def test_a_corruption_acting_on_sar_in_db_is_refused_naming_the_band(name, protocol):
    image = _stack()
    low, high = image[..., 13].min(), image[..., 13].max()
    settings = dict(key=KEY, protocol=protocol, max_value=10000)
    acted = dict(bands=[0, 13]) if name == 'haze' else {}  # haze told to act on VV
    for severity in (0, 3):
        with pytest.raises(ValueError) as error:
            corrupt(image, name, severity, band_names=NAMES, **settings,
                    **(acted or dict(bands=list(range(15)))))
        message = str(error.value)
        assert message.startswith(f'band 13 (VV) has values in [{low!s}, {high!s}], outside its '
                                  'valid range [0, 10000]'), message
        assert 'Valid: values in [0, full scale]' in message
        assert 'max_value as a list with one value per band' in message
        # without a band selection the one-full-scale message, ending with the bands
        if not acted:
            with pytest.raises(ValueError) as error:
                corrupt(image, name, severity, band_names=NAMES, **settings)
            message = str(error.value)
            assert 'float images must lie in [0, max_value] = [0, 10000]' in message
            assert (f'Bands outside their range: band 13 (VV) in [{low!s}, {high!s}]; band 14 '
                    '(VH) in [') in message, message
            with pytest.raises(ValueError, match=r'outside their range: band 13 in '):
                corrupt(image, name, severity, **settings)  # no names: positions


def test_bands_left_alone_pass_through_whatever_they_hold():
    rng = np.random.default_rng(8)
    deep = rng.integers(0, 4096, (12, 10, 3)).astype(np.uint16)
    deep[..., 2] = 60000  # above the 12-bit full scale: not acted on
    for name, protocol in (('poisson_gaussian_noise', 'geofm_calibration'),
                           ('gaussian_noise', 'reobench'), ('gaussian_blur', 'reobench')):
        settings = dict(key=1, protocol=protocol, max_value=4095)
        out = corrupt(deep, name, 3, bands=[0, 1], **settings)
        np.testing.assert_array_equal(out[..., 2], deep[..., 2])
        # the acted-on bands saw zeros in place of the band out of range
        zeroed = deep.copy()
        zeroed[..., 2] = 0
        np.testing.assert_array_equal(out[..., :2], corrupt(zeroed, name, 3, **settings)[..., :2])
        with pytest.raises(ValueError, match=r'band 2 has values in \[60000, 60000\], outside '
                                             r'its valid range \[0, 4095\]'):
            corrupt(deep, name, 3, bands=[0, 2], **settings)
    floats = rng.random((9, 8, 3)).astype(np.float32)
    floats[3, 4, 1] = np.nan
    out = corrupt(floats, 'haze', 2, bands=[0, 2])
    np.testing.assert_array_equal(out[..., 1], floats[..., 1])  # NaN included
    with pytest.raises(ValueError, match=r'band 1 \(B03\): found NaN; the bands a corruption '
                                         r'acts on must be finite'):
        corrupt(floats, 'haze', 2, bands=[1], band_names=['B02', 'B03', 'B04'])


def _noise_by_hand(image, scales, severity=3, sigma=0.06):
    """gaussian_noise on each band divided by its own full scale, from the sample's
    generator: ``clip(x_b / s_b + σ·z_b, 0, 1) · s_b``."""
    rng = make_rng(0, 'reobench/gaussian_noise', severity, KEY)
    noise = rng.standard_normal(image.shape, dtype=np.float32) * np.float32(sigma)
    out = np.empty_like(image)
    for b, scale in enumerate(scales):
        y = np.clip(image[..., b] * np.float32(1 / scale) + noise[..., b], 0, 1)
        out[..., b] = np.minimum(y * np.float32(scale), np.float32(scale))
    return out


def test_full_scales_per_band():
    image = _stack()
    linear = image.copy()
    linear[..., SAR] = 10 ** (image[..., SAR] / 10)  # dB to linear power: 0.003..3.2
    scales = [10000.0] * 13 + [4.0, 4.0]
    listed = corrupt(linear, 'gaussian_noise', 3, key=KEY, max_value=scales)
    np.testing.assert_array_equal(listed, _noise_by_hand(linear, scales))
    by_name = {name: 10000 for name in NAMES[:13]}
    by_name.update(vv=4, VH=4.0)
    np.testing.assert_array_equal(
        corrupt(linear, 'gaussian_noise', 3, key=KEY, max_value=by_name, band_names=NAMES),
        listed)
    # a band the mapping leaves out takes the dtype's default (1.0 for floats)
    partial = corrupt(linear[..., SAR] / 4, 'haze', 2, max_value={'VV': 1.0},
                      band_names=['VV', 'VH'])
    np.testing.assert_array_equal(partial, corrupt(linear[..., SAR] / 4, 'haze', 2))
    # geometric corruptions too: each band as it alone moves at its full scale
    moved, _ = corrupt_geometric(linear, 'rotate', 2, max_value=scales)
    for b in (0, 13):
        alone, _ = corrupt_geometric(np.ascontiguousarray(linear[..., b]), 'rotate', 2,
                                     max_value=scales[b])
        np.testing.assert_array_equal(moved[..., b], alone)
    # one value for every band, as a list, is the plain full scale
    np.testing.assert_array_equal(corrupt(image[..., :13], 'haze', 2, max_value=[10000] * 13),
                                  corrupt(image[..., :13], 'haze', 2, max_value=10000))
    deep = np.full((6, 7, 2), 4095, np.uint16)
    np.testing.assert_array_equal(corrupt(deep, 'haze', 2, max_value=[4095, None])[..., 1],
                                  corrupt(deep[..., 1], 'haze', 2))


@pytest.mark.parametrize('max_value,options,match', [
    ([10000] * 14, {}, r'max_value lists 14 full scales but the image has 15 bands'),
    ({'VV': 4}, {}, r"max_value is given by band name \(\['VV'\]\), so it needs the image's "
                    r'band names'),
    ({'HH': 4}, dict(band_names=NAMES), r"max_value names the band 'HH', which this image "
                                        r"does not have; its bands are \['B01'"),
    ([10000] * 14 + [-1], {}, r'max_value\[14\]: max_value must be None or a finite number'),
    ([], {}, r'max_value lists no full scale'),
    ({}, {}, r'max_value maps no band name'),
    ({'VV': 1, ' vv': 2}, {}, r"max_value names the band ' vv' twice"),
    ({3: 1}, {}, r'maps band names \(strings\) to full scales, got the key 3'),
    ('10000', {}, r'max_value must be None or a finite number > 0'),
    (10000, dict(band_names=NAMES[:3]), r'band_names name 3 bands .* but the image has 15'),
])
def test_bad_per_band_full_scales(max_value, options, match):
    for severity in (0, 2):
        with pytest.raises(ValueError, match=match):
            corrupt(_stack(), 'haze', severity, max_value=max_value, **options)


def test_a_fractional_full_scale_of_a_uint16_band_names_the_band():
    deep = np.zeros((4, 4, 2), np.uint16)
    with pytest.raises(ValueError, match=r'max_value of band 1 \(VH\): max_value for uint16 '
                                         r'images must be a whole number'):
        corrupt(deep, 'haze', 1, max_value=[4095, 4095.5], band_names=['VV', 'VH'])


def test_the_helpers():
    assert check_band_max_values(None) is None
    assert check_band_max_values(255) == 255.0
    assert check_band_max_values(np.array([1.0, 2.0])) == (1.0, 2.0)
    assert check_band_max_values({'VV': 2}) == {'VV': 2}
    assert needs_band_names({'VV': 2}, {}) and needs_band_names(1.0, {'band_noise': 'sensor'})
    assert not needs_band_names([1.0, 2.0], {'band_noise': [(1, 1), (1, 1)]})
    assert by_band_name({'b02': 1}, ['B02', None, 'B02'], 'x') == [1, None, 1]
    assert per_band_full_scales(np.float32, 2.0, 3) is None
    assert per_band_full_scales(np.uint16, [None, 4095], 2) == ((65535.0, 4095.0),
                                                                (None, 4095))


# ------------------------------------------------------------------ the torch engine

def test_the_torch_engine_checks_the_acted_bands_only():
    torch = pytest.importorskip('torch')
    from reobench_corruptions.torch_engine import corrupt_torch
    image = _stack()
    batch = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))[None]
    for name in ('haze', 'cloud'):
        out = corrupt_torch(batch, name, 3, keys=[KEY], max_value=10000, bands=OPTICAL)
        assert torch.equal(out[0, 13:], batch[0, 13:])
        expected = corrupt(image, name, 3, key=KEY, max_value=10000, bands=OPTICAL)
        difference = np.abs(out[0].numpy().transpose(1, 2, 0) - expected)
        assert difference.max() <= 10000 / 255, name  # the torch engine's exact parity
    low, high = image[..., 13].min(), image[..., 13].max()
    with pytest.raises(ValueError) as error:
        corrupt_torch(batch, 'gaussian_noise', 3, keys=[KEY], max_value=10000,
                      band_names=NAMES, bands=[0, 13])
    assert str(error.value).startswith(f'band 13 (VV) has values in [{low!s}, {high!s}], outside '
                                       'its valid range [0, 10000]'), str(error.value)
    with pytest.raises(ValueError, match=r'\[0, max_value\].*Bands outside their range: '
                                         r'band 13 \(VV\) in \['):
        corrupt_torch(batch, 'gaussian_noise', 3, keys=[KEY], max_value=10000,
                      band_names=NAMES)
    # full scales per band: haze and rotate against the numpy engine (exact parity)
    linear = image.copy()
    linear[..., SAR] = 10 ** (image[..., SAR] / 10)
    by_name = dict({name: 10000 for name in NAMES[:13]}, VV=4, VH=4)
    tensor = torch.from_numpy(np.ascontiguousarray(linear.transpose(2, 0, 1)))[None]
    for name in ('haze', 'rotate'):
        got = corrupt_torch(tensor, name, 2, keys=[KEY], max_value=by_name,
                            band_names=NAMES)[0].numpy().transpose(1, 2, 0)
        want = corrupt(linear, name, 2, key=KEY, max_value=by_name, band_names=NAMES)
        scales = np.array([10000.0] * 13 + [4.0, 4.0])
        assert (np.abs(got - want) / scales).max() < 1e-6, name
    deep = np.random.default_rng(1).integers(0, 4096, (3, 10, 12)).astype(np.uint16)
    deep[2] = 60000
    out = corrupt_torch(torch.from_numpy(deep)[None], 'poisson_gaussian_noise', 3, keys=[KEY],
                        protocol='geofm_calibration', max_value=4095, bands=[0, 1])
    assert torch.equal(out[0, 2], torch.from_numpy(deep[2]))
