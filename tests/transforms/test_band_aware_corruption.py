"""ApplyCorruption reads the band names of multispectral rasters.

A 15-band uint16 GeoTIFF (the 13 Sentinel-2 bands, then Sentinel-1 VV and VH) loaded with
LoadMultiBandImageFromFile: the optical-only corruptions (cloud, haze) change the 13
optical bands exactly as the engine does on the optical sub-image and leave the SAR bands
bit-exact; gaussian_noise changes every band; an explicit ``bands`` option wins; a VV/VH
image under cloud is refused; an RGB pipeline (no band names) gives the engine's result."""
import numpy as np
import pytest

import reobench_mm  # noqa: F401  (registration)
from reobench_corruptions import corrupt
from reobench_mm.transforms import ApplyCorruption
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS, LoadMultiBandImageFromFile

from raster_helpers import sentinel2_bands, write_raster

STACK = SENTINEL2_BANDS + ('VV', 'VH')
OPTICAL = list(range(13))
SAR = [13, 14]
KEY = 'S2_S1_tile.tif'  # ApplyCorruption keys the draws by the file name


@pytest.fixture
def stack(tmp_path):
    """(path, the 15×H×W array written): Sentinel-2 bands then VV, VH."""
    rng = np.random.default_rng(5)
    sar = rng.integers(1, 10001, (2, 40, 48)).astype(np.uint16)  # within max_value
    bands = np.concatenate([sentinel2_bands(seed=1), sar])
    return write_raster(tmp_path / KEY, bands, descriptions=STACK), bands


def _load(path, **options):
    return LoadMultiBandImageFromFile(**options)(dict(img_path=path))


def _apply(results, corruption, severity=3, **options):
    step = ApplyCorruption(corruption, severity, seed=4, max_value=10000, **options)
    return step(dict(results, img=results['img'].copy()))['img']


@pytest.mark.parametrize('corruption', ['cloud', 'haze'])
def test_optical_corruptions_leave_the_sar_bands_bit_exact(stack, corruption):
    path, written = stack
    results = _load(path)
    assert results['band_names'] == STACK
    clean = results['img']
    out = _apply(results, corruption)
    assert out.dtype == np.uint16 and out.shape == clean.shape
    np.testing.assert_array_equal(out[..., SAR], written[SAR].transpose(1, 2, 0))
    expected = corrupt(np.ascontiguousarray(clean[..., OPTICAL]), corruption, 3, seed=4,
                       key=KEY, max_value=10000)
    np.testing.assert_array_equal(out[..., OPTICAL], expected)
    assert all((out[..., b] != clean[..., b]).mean() > 0.1 for b in OPTICAL)
    # without band names every band, the SAR ones included, would be changed
    unnamed = _apply(dict(results, band_names=None), corruption)
    assert all((unnamed[..., b] != clean[..., b]).any() for b in SAR)


def test_noise_acts_on_every_band(stack):
    path, _ = stack
    results = _load(path)
    out = _apply(results, 'gaussian_noise')
    assert all((out[..., b] != results['img'][..., b]).mean() > 0.5 for b in range(15))
    np.testing.assert_array_equal(out, corrupt(results['img'], 'gaussian_noise', 3, seed=4,
                                               key=KEY, max_value=10000))


def test_an_explicit_bands_option_wins_over_the_band_names(stack):
    path, _ = stack
    results = _load(path)
    clean = results['img']
    out = _apply(results, 'cloud', corruption_options=dict(cloud=dict(bands=[1, 2, 3, 14])))
    untouched = [b for b in range(15) if b not in (1, 2, 3, 14)]
    np.testing.assert_array_equal(out[..., untouched], clean[..., untouched])
    assert (out[..., 14] != clean[..., 14]).any()  # the VH band: the caller asked for it
    everywhere = _apply(results, 'cloud', corruption_options=dict(cloud=dict(bands=None)))
    np.testing.assert_array_equal(everywhere, corrupt(clean, 'cloud', 3, seed=4, key=KEY,
                                                      max_value=10000))


def test_a_sar_only_image_is_refused_under_an_optical_corruption(stack):
    path, written = stack
    results = _load(path, bands=['VV', 'VH'])
    np.testing.assert_array_equal(results['img'], written[SAR].transpose(1, 2, 0))
    message = (r"ApplyCorruption\('cloud', severity=3\) acts on optical bands only, and this "
               r"image has none: its bands are VV \(sar\), VH \(sar\)\. 'cloud' makes no "
               r'sense for that sensor')
    with pytest.raises(ValueError, match=message):
        _apply(results, 'cloud')
    # corruptions of every band run on it
    out = _apply(results, 'gaussian_blur')
    assert out.shape == results['img'].shape and not np.array_equal(out, results['img'])


def test_band_names_must_match_the_image(stack):
    path, _ = stack
    results = _load(path)
    with pytest.raises(ValueError, match=r"band_names name 2 bands \(\['VV', 'VH'\]\) but its "
                                         r'image has 15'):
        _apply(dict(results, band_names=('VV', 'VH')), 'haze')


def test_unknown_band_names_are_corrupted_on_every_band(stack):
    path, _ = stack
    results = _load(path)
    names = tuple(f'band_{i}' for i in range(15))
    out = _apply(dict(results, band_names=names), 'haze')
    np.testing.assert_array_equal(out, corrupt(results['img'], 'haze', 3, max_value=10000))


@pytest.mark.parametrize('corruption', ['cloud', 'haze', 'gaussian_noise'])
def test_an_rgb_pipeline_is_unchanged(corruption):
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, (32, 36, 3)).astype(np.uint8)
    results = dict(img=image.copy(), img_path='/data/rgb_7.png', ori_shape=(32, 36))
    out = ApplyCorruption(corruption, 3, seed=4)(results)['img']
    np.testing.assert_array_equal(out, corrupt(image, corruption, 3, seed=4, key='rgb_7.png'))
    assert not np.array_equal(out, image)
