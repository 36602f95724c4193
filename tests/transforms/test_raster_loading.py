"""LoadMultiBandImageFromFile and IgnoreNodataLabels on GeoTIFFs written with rasterio.

Against the arrays written: a 13-band uint16 Sentinel-2-like tile (band descriptions set,
a nodata frame) loads bit-exact with the bands in the asked order, by name and by index;
the stored data type is kept; the nodata mask is the frame (a pixel is nodata only when
every chosen band is); IgnoreNodataLabels ignores exactly those label pixels and refuses
labels that moved; a cloud applied by the engine to chosen bands leaves the others
bit-exact; two windows give the parts of the whole read; ChannelAdapter takes the
13-band image; an mmseg dataset with the steps builds, and the placement rules put
ApplyCorruption after the loading; bad input is refused with what is valid."""
import cv2
import numpy as np
import pytest
import torch
from mmengine.registry import init_default_scope

import reobench_mm  # noqa: F401  (registration)
from reobench_corruptions.condition import Condition
from reobench_mm.registry import MODELS, TRANSFORMS
from reobench_mm.transforms import ApplyCorruption
from reobench_mm.transforms.placement import is_image_loading_name, place_condition
from reobench_mm.transforms.raster_loading import (SENTINEL2_BANDS, IgnoreNodataLabels,
                                                   LoadMultiBandImageFromFile, read_raster)

from raster_helpers import BORDER, sentinel2_tile, write_raster

#: The visible and near-infrared 10 m bands, the ones a cloud model is applied to here.
OPTICAL = ('B02', 'B03', 'B04', 'B08')
TINY_RESNET = dict(type='ResNetV1c', depth=18, stem_channels=16, base_channels=16,
                   out_indices=(0, 1, 2, 3), norm_cfg=dict(type='BN', requires_grad=True))


@pytest.fixture
def tile(tmp_path):
    """(path, the 13×H×W array written)."""
    path = tmp_path / 'S2_tile.tif'
    return str(path), sentinel2_tile(path)


def _load(path, **options):
    return LoadMultiBandImageFromFile(**options)(dict(img_path=path))


def _frame(height, width):
    mask = np.zeros((height, width), bool)
    mask[:BORDER] = mask[-BORDER:] = True
    mask[:, :BORDER] = mask[:, -BORDER:] = True
    return mask


def test_registered_and_placed_as_image_loading():
    assert is_image_loading_name('LoadMultiBandImageFromFile')
    assert type(TRANSFORMS.build(dict(type='LoadMultiBandImageFromFile'))) is \
        LoadMultiBandImageFromFile
    assert type(TRANSFORMS.build(dict(type='IgnoreNodataLabels'))) is IgnoreNodataLabels


def test_every_band_in_file_order_bit_exact(tile):
    path, written = tile
    results = _load(path)
    image = results['img']
    assert image.dtype == np.uint16 and image.shape == (40, 48, 13)
    assert image.flags.c_contiguous
    np.testing.assert_array_equal(image, written.transpose(1, 2, 0))
    assert results['img_shape'] == results['ori_shape'] == (40, 48)
    assert results['band_names'] == SENTINEL2_BANDS
    assert results['band_indices'] == tuple(range(1, 14)) and results['window'] is None


@pytest.mark.parametrize('bands', [['B8A', 'B04', 'B03', 'B02'], [9, 4, 3, 2],
                                   ['B8A', 4, 'B03', 2]])
def test_chosen_bands_in_the_asked_order_by_name_and_index(tile, bands):
    path, written = tile
    results = _load(path, bands=bands)
    np.testing.assert_array_equal(results['img'], written[[8, 3, 2, 1]].transpose(1, 2, 0))
    assert results['band_names'] == ('B8A', 'B04', 'B03', 'B02')
    assert results['band_indices'] == (9, 4, 3, 2)


def test_names_from_band_names_when_the_file_has_no_descriptions(tmp_path):
    path = str(tmp_path / 'plain.tif')
    written = sentinel2_tile(path, described=False)
    results = _load(path, bands=['B8A', 'B11'], band_names=SENTINEL2_BANDS)
    np.testing.assert_array_equal(results['img'], written[[8, 11]].transpose(1, 2, 0))
    assert results['band_names'] == ('B8A', 'B11')
    # unnamed bands: None; names cannot be asked for
    assert _load(path, bands=[1])['band_names'] == (None, )
    with pytest.raises(ValueError, match=r"band 'B02' is not a band name of .*band "
                       r'descriptions \(none set\); band_names \(none given\)'):
        _load(path, bands=['B02'])


def test_descriptions_are_matched_first_and_band_names_name_the_results(tmp_path):
    path = str(tmp_path / 'colours.tif')
    described = ('coastal', 'blue', 'green') + SENTINEL2_BANDS[3:]
    write_raster(path, np.arange(13 * 4 * 5, dtype=np.uint16).reshape(13, 4, 5),
                 descriptions=described)
    results = _load(path, bands=['blue', 'B8A'], band_names=SENTINEL2_BANDS)
    assert results['band_indices'] == (2, 9) and results['band_names'] == ('B02', 'B8A')
    assert _load(path, bands=['blue'])['band_names'] == ('blue', )


@pytest.mark.parametrize('dtype', [np.uint8, np.int16, np.float32, np.uint16])
def test_the_stored_type_is_kept_and_one_band_stays_three_dimensional(tmp_path, dtype):
    rng = np.random.default_rng(1)
    bands = (rng.normal(0, 1000, (1, 9, 7)) if dtype != np.uint8
             else rng.integers(0, 256, (1, 9, 7))).astype(dtype)
    path = write_raster(tmp_path / 'one.tif', bands)
    results = _load(path)
    assert results['img'].dtype == dtype and results['img'].shape == (9, 7, 1)
    np.testing.assert_array_equal(results['img'][..., 0], bands[0])
    assert not results['nodata_mask'].any()  # no nodata value: nothing masked


def test_nodata_mask_is_the_frame_where_every_band_is_nodata(tile):
    path, written = tile
    mask = _load(path)['nodata_mask']
    assert mask.dtype == bool and mask.shape == (40, 48)
    np.testing.assert_array_equal(mask, _frame(40, 48))
    assert written[4, 20, 24] == 0 and not mask[20, 24]  # 0 in one band only: valid
    # that one band alone: the pixel is nodata in it
    single = _load(path, bands=['B05'])['nodata_mask']
    np.testing.assert_array_equal(single, _frame(40, 48) | (written[4] == 0))
    assert single[20, 24]
    # the value given: the same rule
    np.testing.assert_array_equal(_load(path, nodata=0)['nodata_mask'], _frame(40, 48))
    assert not _load(path, nodata=1)['nodata_mask'].any()


def test_nodata_given_for_a_file_without_one_nan_included(tmp_path):
    bands = np.ones((2, 6, 5), np.float32)
    bands[:, 0] = np.nan
    bands[0, 3, 3] = np.nan  # one band only
    path = write_raster(tmp_path / 'float.tif', bands)
    assert not _load(path)['nodata_mask'].any()
    mask = _load(path, nodata=float('nan'))['nodata_mask']
    np.testing.assert_array_equal(np.flatnonzero(mask.any(axis=1)), [0])
    assert mask[0].all() and not mask[3, 3]


def test_ignore_nodata_labels_after_the_annotations(tile):
    path, _ = tile
    results = _load(path)
    label = np.random.default_rng(0).integers(0, 6, (40, 48)).astype(np.uint8)
    results['gt_seg_map'] = label.copy()
    out = IgnoreNodataLabels(ignore_index=255)(results)['gt_seg_map']
    frame = _frame(40, 48)
    assert (out[frame] == 255).all()
    np.testing.assert_array_equal(out[~frame], label[~frame])
    assert out.dtype == np.uint8
    assert repr(IgnoreNodataLabels(7)) == 'IgnoreNodataLabels(ignore_index=7)'


@pytest.mark.parametrize('change,message', [
    (lambda r: r.pop('nodata_mask'), 'needs nodata_mask'),
    (lambda r: r.pop('gt_seg_map'), 'needs gt_seg_map'),
    (lambda r: r.update(gt_seg_map=np.zeros((20, 48), np.uint8)),
     'nodata mask is 40x48 but gt_seg_map 20x48'),
    (lambda r: r.update(corruption='rotate', severity=2), r'after rotate \(severity 2\) moved'),
    (lambda r: r.update(flip=True), 'after a flip moved'),
    (lambda r: r.update(gt_seg_map=np.zeros((40, 48), np.int8)), 'does not fit the int8'),
])
def test_ignore_nodata_labels_refusals(tile, change, message):
    results = _load(tile[0])
    results['gt_seg_map'] = np.zeros((40, 48), np.uint8)
    change(results)
    with pytest.raises(RuntimeError, match=message):
        IgnoreNodataLabels(255)(results)
    # clean conditions and pixel-value corruptions move nothing
    results = _load(tile[0])
    results.update(gt_seg_map=np.zeros((40, 48), np.uint8), corruption='haze', severity=3)
    IgnoreNodataLabels(255)(results)
    with pytest.raises(ValueError, match='ignore_index must be an integer >= 0'):
        IgnoreNodataLabels(-1)


def test_cloud_on_the_optical_bands_leaves_the_others_bit_exact(tile):
    path, written = tile
    results = _load(path)
    optical = [results['band_names'].index(n) for n in OPTICAL]  # positions from 0
    assert optical == [1, 2, 3, 7]
    clean = results['img'].copy()
    step = ApplyCorruption('cloud_shadow', 4, protocol='geofm_calibration',
                           corruption_options=dict(cloud_shadow=dict(bands=optical)))
    cloudy = step(dict(results, img=clean.copy()))['img']
    others = [b for b in range(13) if b not in optical]
    assert cloudy.dtype == np.uint16
    np.testing.assert_array_equal(cloudy[..., others], written[others].transpose(1, 2, 0))
    assert all((cloudy[..., b] != clean[..., b]).mean() > 0.5 for b in optical)
    # the chosen bands are exactly those of the cloud over every band
    everywhere = ApplyCorruption('cloud_shadow', 4, protocol='geofm_calibration')(
        dict(results, img=clean.copy()))['img']
    np.testing.assert_array_equal(cloudy[..., optical], everywhere[..., optical])
    # a geometric corruption moves every band: no band selection, naming what it takes
    with pytest.raises(ValueError, match=r"corruption_options\['rotate'\] must be a dict of "
                       r"its options \(it has none\)"):
        ApplyCorruption('rotate', 3, corruption_options=dict(rotate=dict(bands=optical)))


def test_windows_are_the_parts_of_the_whole_read(tile):
    path, _ = tile
    whole = _load(path)
    left = _load(path, window=(0, 0, 20, 40))
    right = _load(path, window=(20, 0, 28, 40))
    np.testing.assert_array_equal(left['img'], whole['img'][:, :20])
    np.testing.assert_array_equal(right['img'], whole['img'][:, 20:])
    np.testing.assert_array_equal(right['nodata_mask'], whole['nodata_mask'][:, 20:])
    assert right['window'] == (20, 0, 28, 40)
    assert right['img_shape'] == right['ori_shape'] == (40, 28)
    top = _load(path, bands=['B12', 'B01'], window=(5, 0, 10, 17))
    bottom = _load(path, bands=['B12', 'B01'], window=(5, 17, 10, 23))
    np.testing.assert_array_equal(np.concatenate([top['img'], bottom['img']]),
                                  whole['img'][:, 5:15][..., [12, 0]])


def test_windows_of_one_scene_are_corrupted_as_images_of_their_own(tile):
    """A pointwise corruption of two windows gives the whole tile's corrupted pixels;
    a random one draws anew for each window (keyed by file name and window, so that the
    windows of one scene do not share one noise pattern), the same bits on every read."""
    from reobench_mm.robustness.attack_run import sample_key
    from reobench_mm.transforms.corruption import sample_draw_key
    path, _ = tile
    windows = ((0, 0, 24, 40), (24, 0, 24, 40))
    parts = [_load(path, window=w) for w in windows]
    whole = _load(path)
    assert sample_draw_key(parts[1]) == 'S2_tile.tif@24,0,24,40'
    assert sample_draw_key(whole) == 'S2_tile.tif'  # unchanged for whole reads
    assert sample_draw_key(dict(sample_idx=np.int64(3))) == 3
    assert sample_key(type('Sample', (), dict(metainfo=parts[0]))(), 0) == \
        'S2_tile.tif@0,0,24,40'  # an attack's random start: the same key
    bright = ApplyCorruption('brightness_contrast', 3, max_value=10000)
    stitched = np.concatenate([bright(dict(p, img=p['img'].copy()))['img'] for p in parts],
                              axis=1)
    np.testing.assert_array_equal(stitched, bright(dict(whole))['img'])
    noise = ApplyCorruption('gaussian_noise', 3, max_value=10000)
    left, right = (noise(dict(p, img=p['img'].copy()))['img'].astype(np.int64)
                   - p['img'].astype(np.int64) for p in parts)
    inner = (slice(4, -4), slice(4, 20))  # away from the nodata frame (clipped there)
    assert (left[inner] != right[inner]).mean() > 0.9
    again = noise(dict(parts[1], img=parts[1]['img'].copy()))['img']
    np.testing.assert_array_equal(again.astype(np.int64) - parts[1]['img'], right)


def test_the_thirteen_bands_go_through_a_channel_adapter(tile):
    init_default_scope('mmseg')
    results = _load(tile[0])
    packed = TRANSFORMS.build(dict(type='PackSegInputs'))(results)
    inputs = packed['inputs']
    assert inputs.shape == (13, 40, 48) and inputs.dtype == torch.uint16
    torch.manual_seed(0)
    model = MODELS.build(dict(type='ChannelAdapter', in_channels=13,
                              backbone=TINY_RESNET)).eval()
    with torch.no_grad():
        features = model(inputs[None].float() / 10000)
    assert [tuple(f.shape[1:]) for f in features] == [(16, 10, 12), (32, 5, 6), (64, 3, 3),
                                                       (128, 2, 2)]
    assert all(torch.isfinite(f).all() for f in features)


@pytest.mark.parametrize('options,message', [
    (dict(bands=[0]), r'1-based band indices'),
    (dict(bands='B02'), r'bands must be None'),
    (dict(bands=[]), r'bands must be None'),
    (dict(bands=[2, 2]), 'more than once'),
    (dict(band_names=['B01', 'B01']), 'names a band twice'),
    (dict(window=(0, 0, 0, 5)), r'width and height >= 1'),
    (dict(window=(0, 0, 5)), r'four ints'),
    (dict(nodata='zero'), r'nodata must be None'),
])
def test_bad_arguments_are_refused_when_built(options, message):
    with pytest.raises(ValueError, match=message):
        LoadMultiBandImageFromFile(**options)


@pytest.mark.parametrize('options,error,message', [
    (dict(bands=[14]), ValueError, r"band index 14 is out of range: .* has 13 bands \(valid: "
     r"indices 1..13; band descriptions \['B01', .*'B8A'"),
    (dict(bands=['B13']), ValueError, r"band 'B13' is not a band name of .*'B12'\]"),
    (dict(bands=['B02', 2]), ValueError, r'more than once \(indices \[2, 2\]\)'),
    (dict(band_names=SENTINEL2_BANDS[:12]), ValueError, r'names 12 bands but .* has 13'),
    (dict(window=(20, 0, 40, 40)), ValueError, r'reaches outside .*48 columns by 40 rows'),
    (dict(window=(0, 39, 48, 2)), ValueError, r'row_off \+ height <= 40'),
    (dict(nodata=70000), ValueError, r'nodata=70000.0 cannot occur in the uint16 bands'),
])
def test_bad_requests_for_a_file(tile, options, error, message):
    with pytest.raises(error, match=message):
        _load(tile[0], **options)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"raster '.*missing.tif' does not exist"):
        _load(str(tmp_path / 'missing.tif'))
    with pytest.raises(FileNotFoundError, match=r'does not exist \(it is a folder\)'):
        _load(str(tmp_path))
    (tmp_path / 'text.tif').write_text('not a raster')
    with pytest.raises(ValueError, match=r"cannot read '.*text.tif' as a raster"):
        read_raster(str(tmp_path / 'text.tif'))
    with pytest.raises(KeyError, match='needs the sample'):
        LoadMultiBandImageFromFile()(dict(sample_idx=0))


def _dataset_folder(tmp_path):
    for split in ('img', 'ann'):
        (tmp_path / split).mkdir()
    written = {}
    for seed, name in enumerate(('tile_a', 'tile_b')):
        written[name] = sentinel2_tile(tmp_path / 'img' / f'{name}.tif', seed=seed)
        label = np.random.default_rng(seed).integers(0, 3, (40, 48)).astype(np.uint8)
        cv2.imwrite(str(tmp_path / 'ann' / f'{name}.png'), label)
    return written


META_KEYS = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'band_names', 'window')


def _loader(root, pipeline):
    return dict(dataset=dict(type='BaseSegDataset', data_root=str(root),
                             data_prefix=dict(img_path='img', seg_map_path='ann'),
                             img_suffix='.tif', seg_map_suffix='.png',
                             metainfo=dict(classes=('a', 'b', 'c')), pipeline=pipeline))


def test_an_mmseg_dataset_with_the_steps_and_the_corruption_placed(tmp_path):
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    written = _dataset_folder(tmp_path)
    pipeline = [dict(type='LoadMultiBandImageFromFile', band_names=SENTINEL2_BANDS),
                dict(type='LoadAnnotations'), dict(type='IgnoreNodataLabels', ignore_index=255),
                dict(type='PackSegInputs', meta_keys=META_KEYS)]
    dataset = DATASETS.build(_loader(tmp_path, pipeline)['dataset'])
    assert len(dataset) == 2
    for index, name in enumerate(('tile_a', 'tile_b')):
        sample = dataset[index]
        assert sample['inputs'].shape == (13, 40, 48)
        np.testing.assert_array_equal(sample['inputs'].numpy(), written[name])
        assert sample['data_samples'].metainfo['band_names'] == SENTINEL2_BANDS
        labels = sample['data_samples'].gt_sem_seg.data[0].numpy()
        assert (labels[_frame(40, 48)] == 255).all() and (labels[~_frame(40, 48)] < 3).all()
    # the placement rules: after the image loading and the loading steps right after it,
    # IgnoreNodataLabels being one of them (the labels of a geometric corruption move
    # with their no-data pixels already ignored)
    for steps, index in (([pipeline[0], pipeline[3]], 1), (pipeline, 3),
                         ([pipeline[0], dict(type='Resize', scale=(24, 20)), *pipeline[1:]], 1)):
        loader = _loader(tmp_path, [dict(step) for step in steps])
        condition = Condition('cloud_shadow', 3, protocol='geofm_calibration')
        (placement, ) = place_condition(loader, condition, 'mmseg')
        assert placement.index == index and placement.inserted, placement.describe()
        assert placement.names[index - 1] in ('LoadMultiBandImageFromFile', 'IgnoreNodataLabels')
    loader = _loader(tmp_path, [dict(step) for step in pipeline])
    place_condition(loader, Condition('rotate', 3), 'mmseg', geometric=True)
    assert [s['type'] for s in loader['dataset']['pipeline']][2:4] == [
        'IgnoreNodataLabels', 'ApplyCorruption']
    # the placed pipeline runs: the sample is clouded and says so
    loader = _loader(tmp_path, [dict(step) for step in pipeline])
    place_condition(loader, Condition('cloud_shadow', 3, protocol='geofm_calibration'), 'mmseg')
    sample = DATASETS.build(loader['dataset'])[0]
    assert sample['data_samples'].metainfo['corruption'] == 'cloud_shadow'
    assert (sample['inputs'].numpy() != written['tile_a']).mean() > 0.3


def test_labels_loaded_after_a_geometric_corruption_are_ignored_then_moved(tmp_path):
    """The 224 px test pipelines' order (image, Resize, then labels at their stored size):
    a geometric corruption leaves the labels to ApplyCorruptionToLabels after the label
    steps, so IgnoreNodataLabels sees labels and nodata mask where the file has them;
    its ignored pixels then move with the labels (as a direct move of the ignored map)."""
    from mmseg.registry import DATASETS

    from reobench_corruptions import corrupt_geometric
    init_default_scope('mmseg')
    _dataset_folder(tmp_path)
    pipeline = [dict(type='LoadMultiBandImageFromFile', band_names=SENTINEL2_BANDS),
                dict(type='Resize', scale=(24, 20), keep_ratio=False),
                dict(type='LoadAnnotations'), dict(type='IgnoreNodataLabels', ignore_index=255),
                dict(type='PackSegInputs', meta_keys=META_KEYS)]
    clean = DATASETS.build(_loader(tmp_path, [dict(s) for s in pipeline])['dataset'])[0]
    ignored = clean['data_samples'].gt_sem_seg.data[0].numpy()
    assert (ignored[_frame(40, 48)] == 255).all()
    loader = _loader(tmp_path, [dict(s) for s in pipeline])
    place_condition(loader, Condition('rotate', 3), 'mmseg', geometric=True)
    names = [s['type'] for s in loader['dataset']['pipeline']]
    assert names.index('ApplyCorruptionToLabels') > names.index('IgnoreNodataLabels')
    rotated = DATASETS.build(loader['dataset'])[0]
    labels = rotated['data_samples'].gt_sem_seg.data[0].numpy()
    image = _load(rotated['data_samples'].metainfo['img_path'])['img']
    _, geometry = corrupt_geometric(image, 'rotate', 3, key='tile_a.tif')
    np.testing.assert_array_equal(labels, geometry.warp_label_map(ignored, 255))
    assert (labels != ignored).mean() > 0.3  # moved


def test_int16_reflectances_load_as_float32_for_the_corruptions(tmp_path):
    """An int16 raster (CloudSEN12's and Sen1Floods11's Sentinel-2 files): the corruption
    refuses its type naming the loading option; with to_float32 the values are kept
    exactly and a cloud applies at the sensor's full scale."""
    path = tmp_path / 'int16.tif'
    written = sentinel2_tile(path).astype(np.int16)
    write_raster(path, written, nodata=0)
    stored = _load(str(path))
    assert stored['img'].dtype == np.int16
    cloud = ApplyCorruption('cloud', 3, max_value=10000)
    with pytest.raises(TypeError, match=r'dtype int16.*to_float32=True.*max_value='):
        cloud(dict(stored))
    loaded = _load(str(path), to_float32=True)
    assert loaded['img'].dtype == np.float32
    np.testing.assert_array_equal(loaded['img'], written.transpose(1, 2, 0).astype(np.float32))
    np.testing.assert_array_equal(loaded['nodata_mask'], stored['nodata_mask'])
    clouded = cloud(dict(loaded, img=loaded['img'].copy()))['img']
    assert clouded.dtype == np.float32 and (clouded != loaded['img']).mean() > 0.1
    with pytest.raises(ValueError, match='to_float32 must be True or False'):
        LoadMultiBandImageFromFile(to_float32=1)


def test_the_files_own_mask_band_counts_as_nodata(tmp_path):
    """A file without nodata value but with a mask band (GDAL's per-dataset mask)."""
    import rasterio
    path = write_raster(tmp_path / 'masked.tif', np.full((3, 6, 5), 9, np.uint16))
    valid = np.full((6, 5), 255, np.uint8)
    valid[:, 0] = 0
    with rasterio.open(path, 'r+') as dst:
        dst.write_mask(valid)
    mask = _load(path)['nodata_mask']
    np.testing.assert_array_equal(mask, valid == 0)
