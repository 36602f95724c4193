"""Band domains of the corruptions, the band-kind table and the ``bands`` option of every
pixel-value corruption."""
import numpy as np
import pytest

from reobench_corruptions import (PROTOCOLS, corrupt, corrupt_geometric, get_corruption,
                                  list_corruptions)
from reobench_corruptions.bands import (BAND_DOMAINS, BAND_KINDS, band_kind, band_kinds,
                                        bands_in_domain, check_band_domain, optical_bands)
from reobench_corruptions.base import register_corruption

ALL = [(protocol, name) for protocol in PROTOCOLS for name in list_corruptions(protocol)]
PIXEL = [(p, n) for p, n in ALL if not get_corruption(n, p).moves_labels]
GEOMETRIC = [(p, n) for p, n in ALL if get_corruption(n, p).moves_labels]
OPTICAL_ONLY = {('reobench', 'cloud'), ('reobench', 'haze'),
                ('reobench', 'brightness_contrast'), ('geofm_calibration', 'cloud_shadow')}


def _image(shape, dtype) -> np.ndarray:
    rng = np.random.default_rng(7)
    top = 255 if dtype == np.uint8 else 4095
    return rng.integers(0, top + 1, shape).astype(dtype)


def _settings(dtype) -> dict:
    return dict(seed=3, key='tile_9.tif', max_value=None if dtype == np.uint8 else 4095)


@pytest.mark.parametrize('protocol,name', ALL)
def test_every_corruption_declares_its_band_domain(protocol, name):
    spec = get_corruption(name, protocol)
    assert spec.band_domain in BAND_DOMAINS
    expected = 'optical' if (protocol, name) in OPTICAL_ONLY else 'all'
    assert spec.band_domain == expected
    assert spec.takes_bands == (not spec.moves_labels)
    assert ('bands' in spec.accepted_options) == spec.takes_bands


def test_registration_checks_the_band_domain():
    with pytest.raises(ValueError, match=r"unknown band domain 'radar'; valid: \['all', "):
        register_corruption('x', 'reobench', 'sensor', 'p', (1, 2, 3, 4, 5),
                            band_domain='radar')
    with pytest.raises(ValueError, match=r"geometric corruption moves every band"):
        register_corruption('x', 'reobench', 'geometric', 'p', (1, 2, 3, 4, 5),
                            band_domain='optical')
    assert check_band_domain('optical') == 'optical'


@pytest.mark.parametrize('dtype', [np.uint8, np.uint16])
@pytest.mark.parametrize('protocol,name', [
    ('reobench', 'gaussian_noise'), ('reobench', 'cloud'), ('reobench', 'haze'),
    ('reobench', 'gaussian_blur'), ('reobench', 'data_gaps'),
    ('reobench', 'compression_artifacts'), ('geofm_calibration', 'poisson_gaussian_noise'),
    ('geofm_calibration', 'cloud_shadow')])
def test_bands_keeps_the_others_bit_exact(protocol, name, dtype):
    """The listed bands are those of the all-band result, the others the input's."""
    image = _image((36, 40, 6), dtype)
    settings = dict(_settings(dtype), protocol=protocol)
    full = corrupt(image, name, 3, **settings)
    chosen, others = [0, 2, 5], [1, 3, 4]
    out = corrupt(image, name, 3, bands=chosen, **settings)
    assert out.dtype == image.dtype and out.shape == image.shape
    np.testing.assert_array_equal(out[..., others], image[..., others])
    np.testing.assert_array_equal(out[..., chosen], full[..., chosen])
    assert not np.array_equal(out[..., chosen], image[..., chosen])
    # any order; every band is the all-band result; None is every band
    np.testing.assert_array_equal(corrupt(image, name, 3, bands=(5, 0, 2), **settings), out)
    np.testing.assert_array_equal(corrupt(image, name, 3, bands=range(6), **settings), full)
    np.testing.assert_array_equal(corrupt(image, name, 3, bands=None, **settings), full)


@pytest.mark.parametrize('protocol,name', PIXEL)
def test_every_pixel_value_corruption_takes_bands(protocol, name):
    image = _image((24, 20, 4), np.uint16)
    settings = dict(_settings(np.uint16), protocol=protocol)
    out = corrupt(image, name, 2, bands=[1], **settings)
    np.testing.assert_array_equal(out[..., [0, 2, 3]], image[..., [0, 2, 3]])
    np.testing.assert_array_equal(out[..., 1], corrupt(image, name, 2, **settings)[..., 1])
    with pytest.raises(ValueError, match=r'band index 4 is out of range; valid: 0\.\.3'):
        corrupt(image, name, 0, bands=[4], **settings)  # checked at severity 0 too


@pytest.mark.parametrize('protocol,name', GEOMETRIC)
def test_geometric_corruptions_refuse_bands(protocol, name):
    image = _image((16, 16, 3), np.uint8)
    message = rf'{name} is a geometric corruption: it moves every band together'
    for severity in (0, 3):
        with pytest.raises(TypeError, match=message):
            corrupt(image, name, severity, key=1, protocol=protocol, bands=[0])
        with pytest.raises(TypeError, match=message):
            corrupt_geometric(image, name, severity, key=1, protocol=protocol, bands=[0])


def test_unknown_options_list_bands_among_the_valid_ones():
    with pytest.raises(TypeError, match=r"haze got unknown options \['bandz'\]; "
                                        r"valid: \['bands'\]"):
        corrupt(_image((8, 8, 3), np.uint8), 'haze', 1, bandz=[0])
    with pytest.raises(TypeError, match=r"valid: \['channel_order', 'bands'\]"):
        corrupt(_image((8, 8, 3), np.uint8), 'compression_artifacts', 1, colour='rgb')


def test_band_kind_table():
    sentinel2 = ['B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B10',
                 'B11', 'B12']
    assert band_kinds(sentinel2) == ('optical', ) * 13
    assert band_kinds(['VV', 'VH', 'HH', 'HV']) == ('sar', ) * 4
    assert band_kinds(['R', 'G', 'B', 'NIR', 'red', ' Green ', 'BLUE']) == ('optical', ) * 7
    assert band_kinds(['DEM', None, 'B13', 'slope']) == ('unknown', ) * 4
    assert set(BAND_KINDS.values()) <= {'optical', 'sar'}
    stack = sentinel2 + ['VV', 'VH']
    assert optical_bands(stack) == list(range(13))
    assert optical_bands(['VV', 'B04', 'DEM', 'B08']) == [1, 3]
    assert optical_bands(['VV', 'VH']) == []
    assert bands_in_domain(['VV', 'B04'], 'all') == [0, 1]
    assert bands_in_domain(['VV', 'B04'], 'optical') == [1]
    assert band_kind('vh') == 'sar'
    # WorldView-3's eight VNIR bands (SpaceNet's multispectral chips); FLAIR's elevation
    # band is not optical, so a cloud leaves it alone
    worldview3 = ['COASTAL', 'BLUE', 'GREEN', 'YELLOW', 'RED', 'RED_EDGE', 'NIR1', 'NIR2']
    assert optical_bands(worldview3) == list(range(8))
    assert optical_bands(['RED', 'GREEN', 'BLUE', 'NIR', 'ELEVATION']) == [0, 1, 2, 3]


def test_band_kind_refusals():
    with pytest.raises(TypeError, match=r"single string 'B04'"):
        band_kinds('B04')
    with pytest.raises(TypeError, match=r'a band name is a string.*got 4 of type int'):
        band_kinds(['B03', 4])
    with pytest.raises(ValueError, match=r"unknown band domain 'sar'"):
        bands_in_domain(['VV'], 'sar')
