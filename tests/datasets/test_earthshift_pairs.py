"""EarthShift's dense shift pairs: Fields of The World (seasons, years, Germany -> Cambodia
and Denmark), Sen1Floods11 (Sentinel-2 -> Sentinel-1) and DeepGlobe Land Cover <-> DFC2022
on their 4 shared classes. Fakes in each official layout (tests/earthshift_fakes.py) are
read by the dataset classes (reobench_mm.datasets.ftw, reobench_mm.datasets.sen1floods11,
reobench_mm.datasets.deepglobe_dfc2022) through the shipped dataset configs' pipelines
(with reobench_mm.transforms.colour_labels and reobench_mm.transforms.nodata_fill); the
per-class pixel counts are compared with a numpy count of the label files under the label
rules, and each shipped shift base is built as the robustness loops build a shift set
(parsed, its dataloader derived from the test dataloader, every check of the loops)."""
import os.path as osp

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope

import reobench_mm  # noqa: F401  (registration)
from earthshift_fakes import (FTW_FRAME, write_deepglobe, write_dfc2022, write_ftw_country,
                              write_sen1floods11)
from helpers import PROJECT_ROOT
from layout_helpers import IGNORE
from layout_helpers import as_shift_condition as _as_shift_condition
from layout_helpers import label_counts as _counts
from layout_helpers import loaded_samples as _loaded
from reobench_mm.datasets.deepglobe_dfc2022 import (DEEPGLOBE_CLASSES, DEEPGLOBE_COLOURS,
                                                    DFC2022_CLASSES, DFC2022Dataset)
from reobench_mm.datasets.ftw import FTW_BANDS, FTWDataset, read_ftw_chip_index
from reobench_mm.datasets.sen1floods11 import (S1_BANDS, Sen1Floods11Dataset,
                                               read_sen1floods11_split)
from reobench_mm.registry import DATASETS
from reobench_mm.transforms.colour_labels import LoadAnnotationsFromColours
from reobench_mm.transforms.nodata_fill import FillNodata
from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

DATASETS_DIR = osp.join(PROJECT_ROOT, 'configs', '_base_', 'datasets')
SHIFTS_DIR = osp.join(PROJECT_ROOT, 'configs', '_base_', 'shifts')


def _config(name):
    return Config.fromfile(osp.join(DATASETS_DIR, name))


def _loader_cfg(config, data_root, split='test', **inner):
    """The config's ``<split>_dataloader`` with ``data_root`` (and ``inner``) set on its
    innermost dataset, no workers."""
    cfg = config[f'{split}_dataloader'].to_dict()
    cfg.update(num_workers=0, persistent_workers=False)
    dataset = cfg['dataset']
    while 'dataset' in dataset:
        dataset = dataset['dataset']
    dataset.update(data_root=data_root, **inner)
    return cfg


def _build(dataset_cfg):
    with DefaultScope.overwrite_default_scope('mmseg'):
        return DATASETS.build(dataset_cfg)


def _innermost(dataset):
    while hasattr(dataset, 'dataset'):
        dataset = dataset.dataset
    return dataset


# ----------------------------------------------------------------------------- FTW
def _ftw_expected(written, samples, num_classes=3):
    """numpy's count of the masks of ``samples`` ((aoi, window) pairs) under the label
    rules: 3 (unlabelled) ignored, and the pixels whose 4 bands are all 0 (no data)."""
    labels = []
    for aoi, window in samples:
        label = written[aoi]['mask3'].astype(np.int64)
        image = written[aoi][window]
        label = np.where((label == 3) | (image == 0).all(axis=0), IGNORE, label)
        labels.append(label)
    return _counts(labels, num_classes)


@pytest.fixture(scope='module')
def ftw_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('ftw'))
    written = {}
    written.update(write_ftw_country(root, 'germany', dict(train=4, val=1, test=2), seed=0))
    written.update(write_ftw_country(root, 'cambodia', dict(train=1, test=2), seed=1))
    written.update(write_ftw_country(root, 'denmark', dict(test=3), seed=2))
    return root, written


def test_ftw_chip_index_and_listing_follow_the_release(ftw_root):
    root, written = ftw_root
    index = read_ftw_chip_index(osp.join(root, 'germany', 'chips_germany.parquet'))
    assert index[:2] == [('ge_train_0', 'train'), ('ge_train_1', 'train')]
    assert len(index) == 8 and index[-1] == ('ge_test_noB', 'test')
    dataset = FTWDataset(data_root=root, country='germany', split='test', window='both',
                         lazy_init=False)
    listed = [(dataset.get_data_info(i)['aoi_id'], dataset.get_data_info(i)['window'])
              for i in range(len(dataset))]
    # window A of every test chip, then window B of those with a window B image
    assert listed == [('ge_test_0', 'a'), ('ge_test_1', 'a'), ('ge_test_noB', 'a'),
                      ('ge_test_0', 'b'), ('ge_test_1', 'b')]
    info = dataset.get_data_info(0)
    assert info['img_path'] == osp.join(root, 'germany', 's2_images', 'window_a',
                                        'ge_test_0.tif')
    assert info['seg_map_path'] == osp.join(root, 'germany', 'label_masks',
                                            'semantic_3class', 'ge_test_0.tif')
    meta = dataset.metainfo
    assert meta['classes'] == ('background', 'field', 'field_boundary')
    assert tuple(meta['band_names']) == FTW_BANDS
    assert meta['label_rules']['ignore_index'] == IGNORE
    two = FTWDataset(data_root=root, country='germany', split='val', mask='semantic_2class')
    assert two.metainfo['classes'] == ('background', 'field') and len(two) == 2
    assert two.get_data_info(0)['seg_map_path'].endswith(
        osp.join('semantic_2class', 'ge_val_0.tif'))


@pytest.mark.parametrize('config, samples', [
    ('ftw-germany_256x256.py', [(f'ge_test_{i}', w) for w in 'ab' for i in range(2)]
     + [('ge_test_noB', 'a')]),
    ('ftw-germany-window-a_256x256.py', [('ge_test_0', 'a'), ('ge_test_1', 'a'),
                                         ('ge_test_noB', 'a')]),
])
def test_ftw_test_sets_count_as_numpy_does(ftw_root, config, samples):
    root, written = ftw_root
    cfg = _loader_cfg(_config(config), root)
    loaded = _loaded(_build(cfg['dataset']))
    assert sorted((i['aoi_id'], i['window']) for i, _ in loaded) == sorted(samples)
    got = _counts([label for _, label in loaded], 3)
    np.testing.assert_array_equal(got, _ftw_expected(written, samples))
    # window A's all-zero frame is no data: without that rule the count would differ
    unframed = _counts([np.where(written[a]['mask3'] == 3, IGNORE, written[a]['mask3'])
                        for a, _ in samples], 3)
    assert (unframed - got).sum() == sum(
        int((written[a]['mask3'] != 3).sum() - (written[a]['mask3'][
            FTW_FRAME:, FTW_FRAME:] != 3).sum()) for a, w in samples if w == 'a') > 0


def test_ftw_year_split_holds_out_part_of_the_train_split(ftw_root):
    root, written = ftw_root
    config = _config('ftw-germany-year_256x256.py')
    parts = {}
    for split in ('train', 'test'):
        cfg = _loader_cfg(config, root, split=split)
        cfg['dataset']['size'] = 3  # of the 8 train samples (4 chips, both windows)
        cfg['dataset']['dataset']['pipeline'] = config.test_pipeline
        dataset = _build(cfg['dataset'])
        parts[split] = _loaded(dataset)
    held = [(i['aoi_id'], i['window']) for i, _ in parts['test']]
    rest = [(i['aoi_id'], i['window']) for i, _ in parts['train']]
    assert len(held) == 3 and not set(held) & set(rest)
    every = [(f'ge_train_{i}', w) for w in 'ab' for i in range(4)]
    assert sorted(held + rest) == sorted(every)
    got = _counts([label for part in parts.values() for _, label in part], 3)
    np.testing.assert_array_equal(got, _ftw_expected(written, every))


@pytest.mark.parametrize('variable, country, windows, id_config', [
    ('ftw_temporal_shift', 'germany', 'b', 'ftw-germany-window-a_256x256.py'),
    ('ftw_year_shift', 'germany', 'ab', 'ftw-germany-year_256x256.py'),
    ('ftw_cambodia_shift', 'cambodia', 'ab', 'ftw-germany_256x256.py'),
    ('ftw_denmark_shift', 'denmark', 'ab', 'ftw-germany_256x256.py'),
])
def test_ftw_shift_bases_are_shift_conditions(ftw_root, variable, country, windows,
                                              id_config):
    root, written = ftw_root
    entry = Config.fromfile(osp.join(SHIFTS_DIR, 'ftw.py'))[variable].to_dict()
    entry['dataset']['data_root'] = root
    test_cfg = _loader_cfg(_config(id_config), root)
    if 'size' in test_cfg['dataset']:
        test_cfg['dataset']['size'] = 2
    shift, dataset = _as_shift_condition(test_cfg, entry, 'ftw')
    expected_type = 'geographic' if country != 'germany' else 'temporal'
    assert shift.shift_type == expected_type and 'pipeline' not in entry['dataset']
    samples = [(a, w) for w in windows for a, e in written.items()
               if e['split'] == 'test' and a.startswith(country[:2]) and e[w] is not None]
    loaded = _loaded(dataset)
    assert sorted((i['aoi_id'], i['window']) for i, _ in loaded) == sorted(samples)
    np.testing.assert_array_equal(_counts([label for _, label in loaded], 3),
                                  _ftw_expected(written, samples))


# ----------------------------------------------------------------------------- Sen1Floods11
SEN1FLOODS11_CHIPS = dict(train=['Ghana_1', 'Spain_2'], valid=['India_3'],
                          test=['Spain_4', 'Paraguay_5'], bolivia=['Bolivia_6'])


@pytest.fixture(scope='module')
def sen1floods11_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('sen1floods11'))
    return root, write_sen1floods11(root, SEN1FLOODS11_CHIPS)


def _sen1floods11_expected(written, chips, sensor):
    """numpy's count: -1 ignored, and the pixels with no data in every band."""
    labels = []
    for chip in chips:
        label = written[chip]['label'].astype(np.int64)
        image = written[chip][sensor]
        nodata = np.isnan(image).all(axis=0) if sensor == 's1' else (image == 0).all(axis=0)
        labels.append(np.where((label == -1) | nodata, IGNORE, label))
    return _counts(labels, 2)


def test_sen1floods11_split_files_and_listing(sen1floods11_root):
    root, _ = sen1floods11_root
    split = osp.join(root, 'splits', 'flood_handlabeled', 'flood_train_data.csv')
    assert read_sen1floods11_split(split) == ['Ghana_1', 'Spain_2', 'Nowhere_1']
    dataset = Sen1Floods11Dataset(data_root=root, split='train', sensor='s1')
    assert [dataset.get_data_info(i)['chip'] for i in range(len(dataset))] == [
        'Ghana_1', 'Spain_2']  # the chip without files is left out
    assert dataset.get_data_info(0)['img_path'].endswith(
        osp.join('HandLabeled', 'S1Hand', 'Ghana_1_S1Hand.tif'))
    assert tuple(dataset.metainfo['band_names']) == S1_BANDS
    s2 = Sen1Floods11Dataset(data_root=root, split='bolivia', sensor='s2')
    assert tuple(s2.metainfo['band_names']) == SENTINEL2_BANDS and len(s2) == 1


@pytest.mark.parametrize('config, sensor, bands, dtype', [
    ('sen1floods11-s2_512x512.py', 's2', 13, np.int16),
    ('sen1floods11-s1_512x512.py', 's1', 2, np.float32),
])
def test_sen1floods11_test_sets_count_as_numpy_does(sen1floods11_root, config, sensor, bands,
                                                    dtype):
    root, written = sen1floods11_root
    dataset = _build(_loader_cfg(_config(config), root)['dataset'])
    loaded = _loaded(dataset)
    chips = SEN1FLOODS11_CHIPS['test']
    assert [i['chip'] for i, _ in loaded] == chips
    np.testing.assert_array_equal(_counts([label for _, label in loaded], 2),
                                  _sen1floods11_expected(written, chips, sensor))
    sample = dataset[0]
    image = sample['inputs'].numpy()
    assert image.shape == (bands, 24, 24)
    assert sample['data_samples'].band_names == (SENTINEL2_BANDS if sensor == 's2'
                                                 else S1_BANDS)
    if sensor == 's1':  # no data and a band's own NaN are 0; the rest as stored
        stored = written[chips[0]]['s1']
        assert np.isfinite(image).all() and image[1, 12, 12] == 0
        np.testing.assert_array_equal(image, np.nan_to_num(stored, nan=0.0))
    else:
        np.testing.assert_array_equal(image, written[chips[0]]['s2'].astype(dtype))


def test_sen1floods11_s1_base_is_a_sensor_shift_of_the_s2_test_set(sen1floods11_root):
    root, written = sen1floods11_root
    base = Config.fromfile(osp.join(SHIFTS_DIR, 'sen1floods11.py'))
    entry = base.sen1floods11_s1_shift.to_dict()
    entry['dataset']['data_root'] = root
    test_cfg = _loader_cfg(_config('sen1floods11-s2_512x512.py'), root)
    shift, dataset = _as_shift_condition(test_cfg, entry, 's1')
    assert shift.shift_type == 'sensor'
    loaded = _loaded(dataset)
    np.testing.assert_array_equal(
        _counts([label for _, label in loaded], 2),
        _sen1floods11_expected(written, SEN1FLOODS11_CHIPS['test'], 's1'))
    assert dataset[0]['inputs'].shape[0] == 2


# ----------------------------------------------------------------------------- DeepGlobe, DFC2022
SHARED_DEEPGLOBE = ('urban_land', 'forest_land', 'water', 'barren_land')
SHARED_DFC2022 = ('urban_fabric', 'forests', 'water', 'open_spaces_with_little_or_no_vegetation')
#: EarthShift's class lists of the pair: DeepGlobe 1, 4, 5, 6 (its 0 = unknown numbering,
#: so 0, 3, 4, 5 here) and DFC2022 1, 10, 14, 12, each to the classes 0..3 in that order
DEEPGLOBE_TO_SHARED = {0: 0, 3: 1, 4: 2, 5: 3}
DFC2022_TO_SHARED = {1: 0, 10: 1, 14: 2, 12: 3}


def _shared_counts(labels, table):
    out = []
    for label in labels:
        mapped = np.full(label.shape, IGNORE, np.int64)
        for value, shared in table.items():
            mapped[label == value] = shared
        out.append(mapped)
    return _counts(out, 4)


@pytest.fixture(scope='module')
def land_cover_roots(tmp_path_factory):
    deepglobe = str(tmp_path_factory.mktemp('deepglobe'))
    dfc2022 = str(tmp_path_factory.mktemp('dfc2022'))
    return (deepglobe, write_deepglobe(deepglobe, ids=[11, 12, 13, 14]),
            dfc2022, write_dfc2022(dfc2022, dict(Nice=3, Brest=2)))


def test_deepglobe_and_dfc2022_listings(land_cover_roots):
    deepglobe, _, dfc2022, _ = land_cover_roots
    dataset = _build(dict(type='DeepGlobeLandCoverDataset', data_root=deepglobe))
    assert [osp.basename(dataset.get_data_info(i)['img_path']) for i in range(4)] == [
        '11_sat.jpg', '12_sat.jpg', '13_sat.jpg', '14_sat.jpg']
    assert dataset.get_data_info(0)['seg_map_path'].endswith(osp.join('train', '11_mask.png'))
    assert dataset.metainfo['classes'] == DEEPGLOBE_CLASSES
    regions = DFC2022Dataset(data_root=dfc2022, regions=['Nice'])
    assert len(regions) == 3 and regions.metainfo['classes'] == DFC2022_CLASSES
    info = regions.get_data_info(0)
    assert info['img_path'].endswith(osp.join('labeled_train', 'Nice', 'BDORTHO',
                                              '30-2012-00.tif'))
    assert info['seg_map_path'].endswith(osp.join('Nice', 'UrbanAtlas',
                                                  '30-2012-00_UA2012.tif'))
    assert len(DFC2022Dataset(data_root=dfc2022)) == 5


def test_deepglobe_colour_masks_decode_as_numpy_does(land_cover_roots):
    deepglobe, written, _, _ = land_cover_roots
    step = LoadAnnotationsFromColours(colours=DEEPGLOBE_COLOURS, threshold=128)
    path = osp.join(deepglobe, 'train', '11_mask.png')
    got = step(dict(seg_map_path=path, seg_fields=[]))['gt_seg_map']
    expected = np.where(written[11] >= 6, IGNORE, written[11])  # unknown and red ignored
    np.testing.assert_array_equal(got, expected)
    stored = cv2.imread(path)[..., ::-1]
    assert ((stored != 0) & (stored != 255)).mean() > 0.5  # the masks are not pure
    exact = LoadAnnotationsFromColours(colours=[(0, 255, 255)])(
        dict(seg_map_path=path, seg_fields=[]))['gt_seg_map']
    assert (exact == 0).sum() < (got == 0).sum()  # without the threshold most are missed


@pytest.mark.parametrize('config, size', [('deepglobe-4cls_512x512.py', 1),
                                          ('dfc2022-4cls_512x512.py', 2)])
def test_land_cover_4_class_sets_count_as_numpy_does(land_cover_roots, config, size):
    deepglobe, deepglobe_labels, dfc2022, dfc2022_labels = land_cover_roots
    is_deepglobe = config.startswith('deepglobe')
    root = deepglobe if is_deepglobe else dfc2022
    loaded = []
    for split in ('train', 'test'):
        cfg = _loader_cfg(_config(config), root, split=split)
        cfg['dataset']['size'] = size
        cfg['dataset']['dataset']['pipeline'] = _config(config).test_pipeline
        dataset = _build(cfg['dataset'])
        assert dataset.metainfo['classes'] == (SHARED_DEEPGLOBE if is_deepglobe
                                               else SHARED_DFC2022)
        loaded += _loaded(dataset)
    if is_deepglobe:
        labels, table = list(deepglobe_labels.values()), DEEPGLOBE_TO_SHARED
    else:
        labels, table = list(dfc2022_labels.values()), DFC2022_TO_SHARED
    assert len(loaded) == len(labels)  # held out and rest: the whole labelled set
    np.testing.assert_array_equal(_counts([label for _, label in loaded], 4),
                                  _shared_counts(labels, table))


@pytest.mark.parametrize('variable, id_config', [
    ('dfc2022_for_deepglobe_shift', 'deepglobe-4cls_512x512.py'),
    ('deepglobe_for_dfc2022_shift', 'dfc2022-4cls_512x512.py'),
])
def test_land_cover_shift_bases_map_onto_the_models_classes(land_cover_roots, variable,
                                                            id_config):
    deepglobe, deepglobe_labels, dfc2022, dfc2022_labels = land_cover_roots
    base = Config.fromfile(osp.join(SHIFTS_DIR, 'deepglobe_dfc2022.py'))
    assert tuple(base.dfc2022_classes) == DFC2022_CLASSES
    assert tuple(base.deepglobe_classes) == DEEPGLOBE_CLASSES
    entry = base[variable].to_dict()
    to_dfc = variable.startswith('deepglobe')
    entry['dataset']['dataset']['data_root'] = deepglobe if to_dfc else dfc2022
    test_cfg = _loader_cfg(_config(id_config), dfc2022 if to_dfc else deepglobe)
    test_cfg['dataset']['size'] = 1
    shift, dataset = _as_shift_condition(test_cfg, entry, 'other')
    assert shift.shift_type == 'source'
    assert dataset.metainfo['classes'] == (SHARED_DFC2022 if to_dfc else SHARED_DEEPGLOBE)
    loaded = _loaded(dataset)
    if to_dfc:
        labels, table = list(deepglobe_labels.values()), DEEPGLOBE_TO_SHARED
    else:
        labels, table = list(dfc2022_labels.values()), DFC2022_TO_SHARED
    assert len(loaded) == len(labels)
    np.testing.assert_array_equal(_counts([label for _, label in loaded], 4),
                                  _shared_counts(labels, table))


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize('kwargs, message', [
    (dict(country='germania'), r"country must be one of \['austria'"),
    (dict(split='validation'), r"split must be one of \['train', 'val', 'test'\]"),
    (dict(window='c'), r"window must be one of \['a', 'b', 'both'\]"),
    (dict(mask='instance'), r"mask must be one of \['semantic_3class'"),
    (dict(country='kenya'), 'FTW country folder .* does not exist'),
])
def test_bad_ftw_arguments_are_refused(ftw_root, kwargs, message):
    with pytest.raises(ValueError, match=message):
        FTWDataset(data_root=ftw_root[0], **kwargs)


def test_bad_inputs_of_the_other_sets_are_refused(tmp_path, land_cover_roots):
    with pytest.raises(ValueError, match=r"split must be one of \['train', 'valid'"):
        Sen1Floods11Dataset(data_root=str(tmp_path), split='val')
    with pytest.raises(ValueError, match=r"sensor must be one of \['s2', 's1'\]"):
        Sen1Floods11Dataset(data_root=str(tmp_path), sensor='S1')
    bad = tmp_path / 'flood_test_data.csv'
    bad.write_text('Spain_4_S1Hand.tif,Spain_4_S2Hand.tif\n')
    with pytest.raises(ValueError, match='row 1: expected'):
        read_sen1floods11_split(str(bad))
    with pytest.raises(FileNotFoundError, match='split file'):
        Sen1Floods11Dataset(data_root=str(tmp_path))
    with pytest.raises(ValueError, match=r"region\(s\) \['Paris'\] are not region folders"):
        DFC2022Dataset(data_root=land_cover_roots[2], regions=['Paris'])
    with pytest.raises(ValueError, match='can never match'):
        LoadAnnotationsFromColours(colours=[(0, 128, 255)], threshold=128)
    with pytest.raises(ValueError, match='names a colour for two classes'):
        LoadAnnotationsFromColours(colours=[(0, 0, 255), (0, 0, 255)])
    with pytest.raises(ValueError, match='ignore_index must be an integer in 2..255'):
        LoadAnnotationsFromColours(colours=[(0, 0, 0), (1, 1, 1)], ignore_index=1)
    with pytest.raises(ValueError, match='value must be a finite number'):
        FillNodata(value=float('nan'))
    with pytest.raises(RuntimeError, match='does not fit the uint8 image'):
        FillNodata(value=-1)(dict(img=np.zeros((2, 2, 1), np.uint8)))


def test_the_s1_twin_loads_the_s2_weights_but_keeps_its_adapter(tmp_path):
    """EarthShift's S1 evaluation: the S2-trained weights behind a new 2-band adapter. A
    13-band model's checkpoint loaded into its 2-band twin by MMEngine's loader (as
    ``load_from`` does): every backbone weight is the checkpoint's, the adapter keeps its
    initialisation."""
    import torch
    from mmengine.runner.checkpoint import load_checkpoint

    from reobench_mm.registry import MODELS

    def adapter(bands, seed):
        torch.manual_seed(seed)
        with DefaultScope.overwrite_default_scope('mmseg'):
            model = MODELS.build(dict(type='ChannelAdapter', in_channels=bands, backbone=dict(
                type='ResNetV1c', depth=18, stem_channels=16, base_channels=16,
                out_indices=(3, ))))
        model.init_weights()
        return model

    s2, s1 = adapter(13, 0), adapter(2, 1)
    torch.save({'state_dict': s2.state_dict()}, str(tmp_path / 's2.pth'))
    initial = s1.adapter.weight.detach().clone()
    load_checkpoint(s1, str(tmp_path / 's2.pth'), strict=False)
    assert torch.equal(s1.adapter.weight, initial) and s1.adapter.weight.shape[1] == 2
    trained = s2.state_dict()
    for name, value in s1.state_dict().items():
        if name.startswith('backbone.'):
            assert torch.equal(value, trained[name]), name
