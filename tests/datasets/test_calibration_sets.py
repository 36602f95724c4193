"""The calibration study's five segmentation sets (CloudSEN12, FTW, DynamicEarthNet,
FLAIR #2, SpaceNet 2): fakes in the release layouts (``tests/calibration_fakes.py``, the
real band counts, data types and nodata conventions) loaded through each set's 224 px
dataset config, against labels computed here with numpy from the fakes' files; the
SpaceNet 2 rasterisation against hand-made polygons; each set's test dataset as a shift
condition (tests/layout_helpers.py: built as the robustness loops build a shift set).
MMSegmentation's own test tool reads every config in test_official_layouts_stock_tool.py."""
import copy
import json
import os
import os.path as osp

import cv2
import numpy as np
import pytest
import rasterio
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from rasterio.transform import Affine

import reobench_mm  # noqa: F401  (registers the datasets and transforms)
from calibration_fakes import (SN2_ORIGIN, SN2_PIXEL, write_cloudsen12, write_dynamicearthnet,
                               write_flair2, write_ftw, write_spacenet2, write_tif)
from helpers import PROJECT_ROOT
from layout_helpers import as_shift_condition, label_counts, loaded_samples
from reobench_mm.datasets.cloudsen12 import CLOUDSEN12_LABEL_RULES, CloudSEN12Dataset
from reobench_mm.datasets.converters.spacenet2 import (building_mask_path, rasterize_buildings,
                                                       read_footprints, write_building_masks)
from reobench_mm.datasets.dynamicearthnet import DynamicEarthNetDataset, parse_split_line
from reobench_mm.datasets.flair2 import FLAIR2_CLASSES, FLAIR2Dataset
from reobench_mm.datasets.label_rules import declared_label_rules
from reobench_mm.datasets.raster_layouts import RasterLayoutDataset, read_split_ids
from reobench_mm.datasets.spacenet2 import SpaceNet2Dataset
from reobench_mm.transforms.onehot_labels import LoadOneHotAnnotations, decode_one_hot

DATASET_CONFIGS = osp.join(PROJECT_ROOT, 'configs', '_base_', 'datasets')
SIZE = 224


# ------------------------------------------------------------------ expected labels (numpy)

def _cloudsen12_labels(fake, sample_id):
    return np.where(fake.nodata[sample_id], 255, fake.labels[sample_id])


def _dynamicearthnet_labels(fake, sample_id):
    """The authors' rule, written differently: the last band at 255 wins, band 7 (snow)
    is ignored, a pixel in no band is 0."""
    onehot = fake.labels[sample_id] == 255
    last = onehot.shape[0] - 1 - np.argmax(onehot[::-1], axis=0)
    return np.where(onehot.any(axis=0), np.where(last == 6, 255, last), 0).astype(np.uint8)


def _flair2_labels(fake, sample_id):
    """The baseline's rule (labels[labels > 13] = 13; labels - 1), 0 ignored."""
    stored = fake.labels[sample_id].astype(np.int64)
    return np.where(stored == 0, 255, np.minimum(stored, 13) - 1).astype(np.uint8)


def _spacenet2_labels(fake, sample_id):
    return np.where(fake.nodata[sample_id], 255, fake.labels[sample_id])


def _ftw_labels(fake, sample_id):
    stored = fake.labels[sample_id]
    return np.where(fake.nodata[sample_id] | (stored == 3), 255, stored)


def _write_spacenet2(root):
    fake = write_spacenet2(root)
    write_building_masks(root)
    return fake


# name: (config, writer, expected labels, the data-info key of the sample id)
SETS = {
    'cloudsen12': ('cloudsen12_224x224.py', write_cloudsen12, _cloudsen12_labels,
                   'sample_id'),
    'dynamicearthnet': ('dynamicearthnet_224x224.py', write_dynamicearthnet,
                        _dynamicearthnet_labels, 'sample_id'),
    'flair2': ('flair2_224x224.py', write_flair2, _flair2_labels, 'sample_id'),
    'spacenet2': ('spacenet2_224x224.py', _write_spacenet2, _spacenet2_labels, 'sample_id'),
    'ftw': ('ftw_224x224.py', write_ftw, _ftw_labels, 'aoi_id'),
}
# the number of samples of each fake's training and test split
SPLIT_SIZES = {'cloudsen12': (2, 1), 'dynamicearthnet': (2, 1), 'flair2': (3, 1),
               'spacenet2': (3, 1), 'ftw': (2, 1)}
BANDS = {'cloudsen12': (13, torch.int16), 'dynamicearthnet': (4, torch.int16),
         'flair2': (5, torch.uint8), 'spacenet2': (8, torch.uint16), 'ftw': (4, torch.uint16)}


@pytest.fixture(scope='module')
def fakes(tmp_path_factory):
    root = tmp_path_factory.mktemp('calibration_sets')
    return {name: writer(str(root / name)) for name, (_, writer, *_) in SETS.items()}


def _config(name):
    return Config.fromfile(osp.join(DATASET_CONFIGS, SETS[name][0]))


def _build(name, key, data_root, **override):
    init_default_scope('mmseg')
    from mmseg.registry import DATASETS
    dataset = copy.deepcopy(_config(name)[key].dataset)
    dataset.update(data_root=data_root, **override)
    return DATASETS.build(dataset)


def _resampled(label, size=SIZE):
    """Nearest-neighbour resampling by an exact factor (the fakes are 112 or 448 px)."""
    factor = size / label.shape[0]
    if factor == 2:
        return label.repeat(2, axis=0).repeat(2, axis=1)
    assert factor == 0.5
    return label[::2, ::2]


def _counts(label):
    return np.bincount(np.asarray(label, np.int64).ravel(), minlength=256)


# ------------------------------------------------------------------ the configs' pipelines

@pytest.mark.parametrize('name', sorted(SETS))
def test_test_pipeline_gives_the_files_labels_after_the_rules(name, fakes):
    """Test split: the image resized to 224 px bilinearly, the labels at their stored size
    with the set's rules applied; per-class pixel counts as numpy counts them."""
    fake, expected_labels, id_key = fakes[name], SETS[name][2], SETS[name][3]
    dataset = _build(name, 'test_dataloader', fake.root)
    assert len(dataset) == SPLIT_SIZES[name][1]
    channels, dtype = BANDS[name]
    for index in range(len(dataset)):
        sample_id = dataset.get_data_info(index)[id_key]
        packed = dataset[index]
        expected = expected_labels(fake, sample_id)
        label = packed['data_samples'].gt_sem_seg.data[0].numpy()
        np.testing.assert_array_equal(_counts(label), _counts(expected))
        np.testing.assert_array_equal(label, expected)
        inputs = packed['inputs']
        assert inputs.shape == (channels, SIZE, SIZE) and inputs.dtype == dtype
        image = fake.images[sample_id]
        if name == 'dynamicearthnet':  # read as red, green, blue, NIR
            image = image[[2, 1, 0, 3]]
        bilinear = cv2.resize(np.moveaxis(image, 0, -1), (SIZE, SIZE),
                              interpolation=cv2.INTER_LINEAR)
        np.testing.assert_array_equal(inputs.numpy(), np.moveaxis(bilinear, -1, 0))
        meta = packed['data_samples'].metainfo
        assert meta['ori_shape'] == label.shape and meta['img_shape'] == (SIZE, SIZE)
        assert meta['band_names'] == tuple(np.array(dataset.metainfo['band_names'])[
            np.array(meta['band_indices']) - 1])


@pytest.mark.parametrize('name', sorted(SETS))
def test_train_pipeline_resizes_labels_by_nearest_neighbour(name, fakes):
    """Training split: image and labels at 224 px, the labels resampled by nearest
    neighbour (only stored classes and the ignore label, counts of the exact resample)."""
    fake, expected_labels, id_key = fakes[name], SETS[name][2], SETS[name][3]
    dataset = _build(name, 'train_dataloader', fake.root)
    assert len(dataset) == SPLIT_SIZES[name][0]
    for index in range(len(dataset)):
        packed = dataset[index]
        expected = _resampled(expected_labels(fake, dataset.get_data_info(index)[id_key]))
        if packed['data_samples'].metainfo['flip']:
            assert packed['data_samples'].metainfo['flip_direction'] == 'horizontal'
            expected = expected[:, ::-1]
        label = packed['data_samples'].gt_sem_seg.data[0].numpy()
        np.testing.assert_array_equal(_counts(label), _counts(expected))
        np.testing.assert_array_equal(label, expected)
        assert packed['inputs'].shape[1:] == (SIZE, SIZE)


@pytest.mark.parametrize('name', sorted(SETS))
def test_configs_state_the_224_input_and_the_sets_rules(name, fakes):
    cfg = _config(name)
    for key in ('train_dataloader', 'test_dataloader'):
        steps = cfg[key].dataset.pipeline
        types = [s['type'] for s in steps]
        resize = steps[types.index('Resize')]
        assert (resize['scale'], resize['keep_ratio'], resize['interpolation']) == \
            ((SIZE, SIZE), False, 'bilinear')
        assert types[0] == 'LoadMultiBandImageFromFile'
        label_step = next(i for i, t in enumerate(types) if t.startswith('Load') and
                          'Annotations' in t)
        # training resizes loaded labels; testing loads them after the resize
        assert (label_step < types.index('Resize')) == (key == 'train_dataloader')
    dataset = _build(name, 'test_dataloader', fakes[name].root)
    rules = declared_label_rules(dataset, name)
    assert rules is not None and rules.ignore_index == 255 and rules.boundaries == 'full'
    assert cfg.label_rules == dataset.metainfo['label_rules']
    assert cfg.test_dataloader.dataset.metainfo['label_rules'] == cfg.label_rules
    loader = cfg.test_dataloader.dataset.pipeline[0]
    assert tuple(loader['band_names']) == tuple(dataset.metainfo['band_names'])


@pytest.mark.parametrize('name', sorted(SETS))
def test_test_set_is_a_shift_condition(name, fakes):
    """A ``shifts`` entry whose dataset is the config's test dataset, built as the
    robustness loops build a shift set beside that test set (the corruption step placed,
    the loops' checks run): its per-class pixel counts are numpy's of the fake's labels
    after the set's rules."""
    fake, expected_labels, id_key = fakes[name], SETS[name][2], SETS[name][3]
    loader_cfg = _config(name).test_dataloader.to_dict()
    loader_cfg.update(num_workers=0, persistent_workers=False)
    loader_cfg['dataset']['data_root'] = fake.root
    entry = dict(shift_type='source', dataset=copy.deepcopy(loader_cfg['dataset']))
    shift, dataset = as_shift_condition(loader_cfg, entry, name)
    assert shift.shift_type == 'source' and len(dataset) == SPLIT_SIZES[name][1]
    loaded = loaded_samples(dataset)
    classes = len(dataset.metainfo['classes'])
    expected = [expected_labels(fake, info[id_key]) for info, _ in loaded]
    got = label_counts([label for _, label in loaded], classes)
    np.testing.assert_array_equal(got, label_counts(expected, classes))
    assert got.sum() > 0


# ------------------------------------------------------------------ the datasets

def test_dataset_classes_are_registered_with_their_metainfo():
    from mmengine.registry import DATASETS
    for cls, classes in ((CloudSEN12Dataset, 4), (DynamicEarthNetDataset, 6),
                         (FLAIR2Dataset, 13), (SpaceNet2Dataset, 2)):
        assert DATASETS.get(cls.__name__) is cls
        assert issubclass(cls, RasterLayoutDataset)
        meta = cls.METAINFO
        assert len(meta['classes']) == len(meta['palette']) == classes
        assert set(meta) >= {'label_rules', 'band_names'}
    assert CloudSEN12Dataset.METAINFO['label_rules'] == CLOUDSEN12_LABEL_RULES


def test_split_lists_and_layout_errors(fakes, tmp_path):
    root = fakes['cloudsen12'].root
    every = CloudSEN12Dataset(data_root=root, data_prefix=dict(img_path='high'))
    assert [every.get_data_info(i)['sample_id'] for i in range(len(every))] == \
        sorted(fakes['cloudsen12'].labels)
    (tmp_path / 'bad.txt').write_text('ROI_0001\n')
    with pytest.raises(ValueError, match=r'<roi_id>/<s2_id>, got .ROI_0001'):
        CloudSEN12Dataset(data_root=root, data_prefix=dict(img_path='high'),
                          ann_file=str(tmp_path / 'bad.txt'))
    (tmp_path / 'other.txt').write_text('ROI_0009/S2X\n')
    with pytest.raises(FileNotFoundError, match=r'1 of 1 images do not exist'):
        CloudSEN12Dataset(data_root=root, data_prefix=dict(img_path='high'),
                          ann_file=str(tmp_path / 'other.txt'))
    (tmp_path / 'empty.txt').write_text('\n\n')
    with pytest.raises(ValueError, match='names no sample'):
        read_split_ids(str(tmp_path / 'empty.txt'), 'x')
    with pytest.raises(FileNotFoundError, match='no sample found under'):
        CloudSEN12Dataset(data_root=str(tmp_path), data_prefix=dict(img_path='high'))
    with pytest.raises(ValueError, match='image_file must be a file name'):
        CloudSEN12Dataset(image_file='', data_root=root)


def test_a_missing_label_file_is_named(tmp_path):
    fake = write_flair2(str(tmp_path))
    missing = osp.join(fake.root, 'flair_labels_train', 'D006_2020', 'Z1_NN', 'msk',
                       'MSK_000012.tif')
    os.remove(missing)
    with pytest.raises(FileNotFoundError, match=r'1 of 3 label files do not exist, e\.g\. '
                                                r"\[.*MSK_000012.tif'\]"):
        FLAIR2Dataset(data_root=fake.root, data_prefix=dict(
            img_path='flair_aerial_train', seg_map_path='flair_labels_train'))


def test_flair2_domains_and_class_merge(fakes):
    root = fakes['flair2'].root
    prefix = dict(img_path='flair_aerial_train', seg_map_path='flair_labels_train')
    one = FLAIR2Dataset(data_root=root, data_prefix=prefix, domains=['D013_2020'])
    assert [one.get_data_info(i)['sample_id'] for i in range(len(one))] == \
        ['D013_2020/Z4_UF/img/IMG_000901']
    assert one.label_map == {**{i: i for i in range(12)}, **{i: 12 for i in range(12, 19)}}
    with pytest.raises(ValueError, match='has the 13 classes'):
        FLAIR2Dataset(data_root=root, data_prefix=prefix,
                      metainfo=dict(classes=FLAIR2_CLASSES[:3]))
    with pytest.raises(ValueError, match='reduce_zero_label=True'):
        FLAIR2Dataset(data_root=root, data_prefix=prefix, reduce_zero_label=False)
    with pytest.raises(ValueError, match='domains must be None or a list'):
        FLAIR2Dataset(data_root=root, data_prefix=prefix, domains='D013_2020')


def test_dynamicearthnet_split_lines(fakes):
    assert parse_split_line('/reprocess-cropped/UTM-24000/10N/26E-183N/1330_3107_13/PF-SR '
                            '/labels/a/Labels/Raster/s/s-2018_01_01.tif 2018-01', 'f') == \
        ('planet/10N/26E-183N/1330_3107_13/PF-SR', 'labels/a/Labels/Raster/s/s-2018_01_01.tif',
         '2018-01')
    with pytest.raises(ValueError, match='<YYYY-MM>'):
        parse_split_line('/planet/x/PF-SR /labels/y.tif 2018_01', 'f')
    with pytest.raises(ValueError, match='needs ann_file'):
        DynamicEarthNetDataset(data_root=fakes['dynamicearthnet'].root)
    with pytest.raises(ValueError, match='day must be a day of the month'):
        DynamicEarthNetDataset(day='1', data_root=fakes['dynamicearthnet'].root,
                               ann_file='dynnet_training_splits/train.txt')
    second = DynamicEarthNetDataset(day='02', data_root=fakes['dynamicearthnet'].root,
                                    ann_file='dynnet_training_splits/test.txt')
    assert second.get_data_info(0)['img_path'].endswith('PF-SR/2019-02-02.tif')


def test_spacenet2_dataset_chips(fakes):
    root = fakes['spacenet2'].root
    every = SpaceNet2Dataset(data_root=root)
    assert [every.get_data_info(i)['sample_id'] for i in range(len(every))] == \
        [f'AOI_2_Vegas_img{k}' for k in (1, 2, 3, 4)]
    with pytest.raises(ValueError, match="unknown product 'PAN'"):
        SpaceNet2Dataset(product='PAN', data_root=root)
    with pytest.raises(FileNotFoundError, match='have no MUL-PanSharpen image'):
        SpaceNet2Dataset(product='MUL-PanSharpen', data_root=root, ann_file='splits/test.txt')


# ------------------------------------------------------------------ one-hot labels

def test_one_hot_decoding_by_hand():
    bands = np.zeros((3, 2, 3), np.uint8)
    bands[0, 0, 0] = bands[1, 0, 1] = bands[2, 0, 2] = 255
    bands[0, 1, 0] = bands[1, 1, 0] = 255  # two bands: the later wins
    bands[2, 1, 1] = 7                     # not the on value
    np.testing.assert_array_equal(decode_one_hot(bands, 255, ignore_bands=[3], unlabelled=0),
                                  [[0, 1, 255], [1, 0, 0]])
    np.testing.assert_array_equal(decode_one_hot(bands, 255), [[0, 1, 2], [1, 255, 255]])


def test_one_hot_loader(tmp_path):
    bands = np.zeros((7, 4, 5), np.uint8)
    bands[6, 0] = 255
    bands[4, 1] = 255
    path = write_tif(str(tmp_path / 'label.tif'), bands)
    step = LoadOneHotAnnotations(on_value=255, ignore_bands=[7], unlabelled=0)
    results = step(dict(seg_map_path=path, seg_fields=[]))
    np.testing.assert_array_equal(results['gt_seg_map'][:, 0], [255, 4, 0, 0])
    assert results['seg_fields'] == ['gt_seg_map'] and results['gt_seg_map'].dtype == np.uint8
    with pytest.raises(ValueError, match='names band 9'):
        LoadOneHotAnnotations(ignore_bands=[9])(dict(seg_map_path=path))
    for bad in (dict(on_value=256), dict(ignore_bands=[0]), dict(ignore_bands='7'),
                dict(unlabelled=-1)):
        with pytest.raises(ValueError, match='LoadOneHotAnnotations'):
            LoadOneHotAnnotations(**bad)
    with pytest.raises(KeyError, match='seg_map_path'):
        step(dict(img_path='x'))


# ------------------------------------------------------------------ SpaceNet 2 rasterisation

def _inside(points, ring):
    """Even-odd ray casting: whether each ``(x, y)`` of ``points`` is inside ``ring``."""
    x, y = points[:, 0], points[:, 1]
    inside = np.zeros(len(points), bool)
    for (x0, y0), (x1, y1) in zip(ring, ring[1:] + ring[:1]):
        crosses = (y0 > y) != (y1 > y)
        with np.errstate(divide='ignore', invalid='ignore'):
            at = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
        inside ^= crosses & (x < at)
    return inside


def _degrees(ring):
    lon0, lat0 = SN2_ORIGIN
    return [[lon0 + c * SN2_PIXEL, lat0 - r * SN2_PIXEL] for c, r in ring]


def _chip(tmp_path, size=(24, 30)):
    image = np.full((8, *size), 100, np.uint16)
    path = str(tmp_path / 'AOI_2_Vegas_Train' / 'MUL' / 'MUL_AOI_2_Vegas_img7.tif')
    write_tif(path, image, crs='EPSG:4326',
              transform=Affine(SN2_PIXEL, 0, SN2_ORIGIN[0], 0, -SN2_PIXEL, SN2_ORIGIN[1]))
    return path


def _geojson(path, polygons, crs='urn:ogc:def:crs:OGC:1.3:CRS84'):
    features = [dict(type='Feature', properties={}, geometry=dict(type='Polygon',
                                                                   coordinates=p))
                for p in polygons]
    content = dict(type='FeatureCollection', features=features)
    if crs:
        content['crs'] = dict(type='name', properties=dict(name=crs))
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(content, handle)
    return str(path)


def test_rasterisation_of_hand_made_polygons(tmp_path):
    """A pixel is a building when its centre is inside a polygon (holes excluded): a
    triangle and a square with a square hole, in pixel coordinates (column, row)."""
    image = _chip(tmp_path)
    triangle = [(2.3, 1.2), (13.7, 4.1), (5.2, 15.6)]
    outer = [(16.4, 3.3), (28.6, 3.3), (28.6, 20.7), (16.4, 20.7)]
    hole = [(19.2, 7.4), (24.9, 7.4), (24.9, 15.1), (19.2, 15.1)]
    path = _geojson(tmp_path / 'buildings.geojson',
                    [[_degrees(triangle + triangle[:1])],
                     [_degrees(outer + outer[:1]), _degrees(hole + hole[:1])]])
    mask = rasterize_buildings(path, image)
    rows, cols = np.mgrid[0:24, 0:30]
    centres = np.stack([cols.ravel() + 0.5, rows.ravel() + 0.5], axis=1)
    expected = _inside(centres, triangle) | (_inside(centres, outer) & ~_inside(centres, hole))
    assert mask.dtype == np.uint8 and mask.shape == (24, 30)
    np.testing.assert_array_equal(mask, expected.reshape(24, 30).astype(np.uint8))
    assert 20 < mask.sum() < 24 * 30 // 2 and mask[11, 21] == 0 and mask[5, 17] == 1
    # the same footprints in web Mercator land on the same pixels
    import rasterio.warp
    mercator = [rasterio.warp.transform_geom('OGC:CRS84', 'EPSG:3857', dict(
        type='Polygon', coordinates=p))['coordinates'] for p in
        ([_degrees(triangle + triangle[:1])],
         [_degrees(outer + outer[:1]), _degrees(hole + hole[:1])])]
    again = _geojson(tmp_path / 'mercator.geojson', mercator, crs='EPSG:3857')
    np.testing.assert_array_equal(rasterize_buildings(again, image), mask)
    # without a crs member: GeoJSON's longitude/latitude
    plain = _geojson(tmp_path / 'plain.geojson', [[_degrees(triangle + triangle[:1])]],
                     crs=None)
    np.testing.assert_array_equal(rasterize_buildings(plain, image),
                                  _inside(centres, triangle).reshape(24, 30))


def test_footprints_without_buildings_and_bad_files(tmp_path):
    image = _chip(tmp_path)
    empty = tmp_path / 'empty.geojson'
    empty.write_text('')
    assert read_footprints(str(empty)) == ([], 'OGC:CRS84')
    assert not rasterize_buildings(str(empty), image).any()
    none = _geojson(tmp_path / 'none.geojson', [])
    assert not rasterize_buildings(none, image).any()
    (tmp_path / 'bad.geojson').write_text('{"type": ')
    with pytest.raises(ValueError, match='is not JSON'):
        read_footprints(str(tmp_path / 'bad.geojson'))
    (tmp_path / 'list.geojson').write_text('[]')
    with pytest.raises(ValueError, match='not a GeoJSON FeatureCollection'):
        read_footprints(str(tmp_path / 'list.geojson'))
    with pytest.raises(FileNotFoundError, match='do not exist'):
        read_footprints(str(tmp_path / 'missing.geojson'))
    with pytest.raises(ValueError, match="unknown SpaceNet 2 product 'RGB'"):
        write_building_masks(str(tmp_path), product='RGB')
    with pytest.raises(FileNotFoundError, match='no MUL-PanSharpen image'):
        write_building_masks(str(tmp_path), product='MUL-PanSharpen')
    with pytest.raises(FileNotFoundError, match='building footprints .* do not exist'):
        write_building_masks(str(tmp_path))


def test_written_masks_keep_the_image_grid_and_reruns_skip_them(tmp_path):
    fake = write_spacenet2(str(tmp_path))
    written = write_building_masks(fake.root)
    assert len(written) == 4
    for chip, expected in fake.labels.items():
        image = osp.join(fake.root, 'AOI_2_Vegas_Train', 'MUL', f'MUL_{chip}.tif')
        path = building_mask_path(image, 'MUL')
        assert path == osp.join(fake.root, 'AOI_2_Vegas_Train', 'building_masks', 'MUL',
                                f'buildings_{chip}.tif')
        with rasterio.open(path) as mask, rasterio.open(image) as src:
            np.testing.assert_array_equal(mask.read(1), expected)
            assert mask.transform == src.transform and mask.crs == src.crs
            assert mask.dtypes == ('uint8',)
    assert write_building_masks(fake.root) == []
    assert len(write_building_masks(fake.root, overwrite=True)) == 4
