"""Per-band statistics against numpy on the same files, nodata excluded.

Integer rasters (uint16, int16 with negative values) give numpy's mean, population std
and default percentiles of all the valid values; float rasters too while no file is
sampled, and an estimate (said so) when one is; pixels are those the loader gives (a
pixel is left out when every chosen band is nodata). The tool writes the JSON and prints
the data_preprocessor line; bad input is refused."""
import json
import sys

import numpy as np
import pytest

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.datasets import band_statistics as band_statistics_module
from reobench_mm.datasets.band_statistics import band_statistics, dataset_image_paths
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

from helpers import PROJECT_ROOT
from raster_helpers import sentinel2_tile, write_raster

PERCENTILES = (0, 2, 37.5, 50, 98, 100)


def _reference(arrays, nodata=0.0):
    """numpy over the pixels not nodata in every band: ``(N×C values)``."""
    values = []
    for bands in arrays:
        pixels = bands.reshape(bands.shape[0], -1).T
        invalid = (np.isnan(pixels) if np.isnan(nodata) else pixels == nodata).all(axis=1)
        values.append(pixels[~invalid])
    return np.concatenate(values)


def _check_against_numpy(result, values, rtol=1e-12):
    assert len(result.bands) == values.shape[1]
    for band, stats in enumerate(result.bands):
        column = values[:, band].astype(np.float64)
        assert stats.count == len(column)
        np.testing.assert_allclose(stats.mean, column.mean(), rtol=rtol, atol=0)
        np.testing.assert_allclose(stats.std, column.std(), rtol=rtol, atol=0)
        assert (stats.minimum, stats.maximum) == (column.min(), column.max())
        for q in PERCENTILES:
            np.testing.assert_allclose(stats.percentiles[q], np.percentile(column, q),
                                       rtol=rtol, atol=0)


@pytest.fixture
def tiles(tmp_path):
    """Two Sentinel-2-like tiles of different sizes: (paths, arrays)."""
    paths = [str(tmp_path / 'a.tif'), str(tmp_path / 'b.tif')]
    arrays = [sentinel2_tile(paths[0], seed=1), sentinel2_tile(paths[1], seed=2, height=23,
                                                               width=31)]
    return paths, arrays


@pytest.fixture(params=[None, 100], ids=['one-strip', 'strips'])
def strips(request, monkeypatch):
    """Whole files at once, or strips of a few rows (100 pixels: 2 to 4 rows)."""
    if request.param:
        monkeypatch.setattr(band_statistics_module, '_STRIP_PIXELS', request.param)


def test_uint16_tiles_equal_numpy_without_the_nodata_frame(tiles, strips):
    paths, arrays = tiles
    result = band_statistics(paths, percentiles=PERCENTILES)
    values = _reference(arrays)
    assert len(values) == 34 * 42 + 17 * 25  # the frames left out, nothing else
    _check_against_numpy(result, values)
    assert result.exact_percentiles and result.dtype == 'uint16'
    assert [b.name for b in result.bands] == list(SENTINEL2_BANDS)
    assert result.bands[4].minimum == 0  # the one valid 0 in band 5 counts


def test_chosen_bands_in_order_and_negative_integers(tmp_path, strips):
    rng = np.random.default_rng(3)
    arrays = [rng.integers(-3000, 3000, (3, 17, 19)).astype(np.int16) for _ in range(2)]
    arrays[0][:, :2] = -9999
    paths = [write_raster(tmp_path / f'{i}.tif', a, nodata=-9999) for i, a in enumerate(arrays)]
    result = band_statistics(paths, bands=[3, 1], percentiles=PERCENTILES)
    _check_against_numpy(result, _reference(arrays, -9999)[:, [2, 0]])
    assert [b.index for b in result.bands] == [3, 1]


def test_float_tiles_exact_while_no_file_is_sampled(tmp_path, strips):
    rng = np.random.default_rng(4)
    arrays = [rng.normal(0.2, 0.05, (2, 30, 20)).astype(np.float32) for _ in range(3)]
    arrays[1][:, 5:9] = np.nan
    paths = [write_raster(tmp_path / f'{i}.tif', a, nodata=float('nan'))
             for i, a in enumerate(arrays)]
    result = band_statistics(paths, percentiles=PERCENTILES)
    assert result.exact_percentiles and result.dtype == 'float32'
    _check_against_numpy(result, _reference(arrays, float('nan')))
    # sampled: the moments stay those of every value, the percentiles are estimates
    sampled = band_statistics(paths, percentiles=PERCENTILES, max_samples_per_file=300)
    assert not sampled.exact_percentiles and 'estimate' in sampled.percentile_method
    values = _reference(arrays, float('nan'))
    for band, stats in enumerate(sampled.bands):
        np.testing.assert_allclose(stats.mean, values[:, band].astype(float).mean(), rtol=1e-12)
        np.testing.assert_allclose(stats.percentiles[50], np.median(values[:, band]),
                                   atol=0.02)


def test_the_nodata_value_given_and_the_tool(tiles, tmp_path, monkeypatch, capsys):
    paths, arrays = tiles
    # nodata=1: no pixel has 1 in every band, so the frame counts too
    counted = band_statistics(paths, nodata=1)
    assert {b.count for b in counted.bands} == {40 * 48 + 23 * 31}
    tool = _tool()
    out = tmp_path / 'stats' / 'bands.json'
    monkeypatch.setattr(sys, 'argv', ['band_statistics.py'])
    assert tool.main([str(tmp_path), '--bands', 'B04', '3', '--out', str(out)]) == 0
    document = json.loads(out.read_text())
    values = _reference(arrays)[:, [3, 2]].astype(float)
    np.testing.assert_allclose(document['mean'], values.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(document['std'], values.std(axis=0), rtol=1e-12)
    assert [b['name'] for b in document['bands']] == ['B04', 'B03']
    assert set(document['bands'][0]['percentiles']) == {'2', '98'}
    printed = capsys.readouterr().out
    mean, std = (', '.join(f'{v:.7g}' for v in numbers)
                 for numbers in (values.mean(axis=0), values.std(axis=0)))
    assert f'data_preprocessor=dict(mean=[{mean}], std=[{std}])' in printed


def _tool():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        'band_statistics_tool', f'{PROJECT_ROOT}/tools/analysis_tools/band_statistics.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_paths_of_a_built_dataset(tiles, tmp_path):
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    paths, _ = tiles
    dataset = DATASETS.build(dict(type='BaseSegDataset', data_root=str(tmp_path),
                                  data_prefix=dict(img_path=''), img_suffix='.tif',
                                  pipeline=[]))
    assert dataset_image_paths(dataset) == sorted(paths)
    with pytest.raises(TypeError, match='expected a built dataset'):
        dataset_image_paths(paths)


@pytest.mark.parametrize('kind,message', [
    ('count', r"gives 3 bands but .* gave 13"),
    ('dtype', r'stores float32 but .* uint16: statistics need one data type'),
    ('nan', r'NaN or infinite values that are not nodata'),
    ('empty', r'band B01 has no valid pixel'),
])
def test_refusals(tiles, tmp_path, kind, message):
    paths, _ = tiles
    other = str(tmp_path / 'other.tif')
    if kind == 'count':
        write_raster(other, np.ones((3, 4, 4), np.uint16))
    elif kind == 'dtype':
        write_raster(other, np.ones((13, 4, 4), np.float32))
    elif kind == 'nan':
        paths = [write_raster(other, np.full((1, 4, 4), np.nan, np.float32))]
    else:
        paths = [write_raster(other, np.zeros((13, 4, 4), np.uint16), nodata=0,
                              descriptions=SENTINEL2_BANDS)]
    with pytest.raises(ValueError, match=message):
        band_statistics(paths + [other] if kind in ('count', 'dtype') else paths)


def test_bad_arguments(tiles):
    paths, _ = tiles
    for options, message in ((dict(paths=paths[0]), 'paths must be a non-empty list'),
                             (dict(percentiles=[101]), r'numbers in \[0, 100\]'),
                             (dict(max_samples_per_file=0), 'max_samples_per_file'),
                             (dict(bands=['B99']), "band 'B99' is not a band name")):
        with pytest.raises(ValueError, match=message):
            band_statistics(**{'paths': paths, **options})
    with pytest.raises(FileNotFoundError, match='does not exist'):
        band_statistics([paths[0] + '.missing'])
