"""Small fakes of the calibration study's five segmentation sets in their release
layouts, written with rasterio (and pyarrow for FTW's chip index): the real band count,
data type and nodata convention of each set, a few tiles of a test size.

Each writer returns :class:`Fake`: the split files or ids it wrote and, per sample id,
the stored label array and the image's nodata mask (every band 0), from which the tests
compute their expected labels with numpy, independently of the package.
"""
import json
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import rasterio
from rasterio.transform import Affine

#: The band descriptions of CloudSEN12's S2L1C.tif.
CLOUDSEN12_DESCRIPTIONS = ('B1', 'B2', 'B3', 'B4', 'B5', 'B6', 'B7', 'B8', 'B8A', 'B9',
                           'B10', 'B11', 'B12')
#: Pixel size and corner of the fake SpaceNet 2 chips (WGS 84 degrees, Las Vegas).
SN2_PIXEL = 1.1e-5
SN2_ORIGIN = (-115.30, 36.20)


@dataclass
class Fake:
    """What a writer wrote: ``labels[id]`` (stored values), ``nodata[id]`` (bool mask of
    the image pixels whose bands are all 0), ``images[id]`` (``C×H×W``) and the split
    ids (``splits[name]``)."""
    root: str
    labels: Dict[str, np.ndarray] = field(default_factory=dict)
    nodata: Dict[str, np.ndarray] = field(default_factory=dict)
    images: Dict[str, np.ndarray] = field(default_factory=dict)
    splits: Dict[str, List[str]] = field(default_factory=dict)


def write_tif(path: str, array: np.ndarray, nodata: Optional[float] = None,
              descriptions=None, crs: str = 'EPSG:32633',
              transform: Affine = Affine(10, 0, 600000, 0, -10, 4000000),
              compress: Optional[str] = None) -> str:
    """Write a ``C×H×W`` (or ``H×W``) array as a GeoTIFF."""
    array = array[None] if array.ndim == 2 else array
    os.makedirs(osp.dirname(path), exist_ok=True)
    options = dict(compress=compress) if compress else {}
    with rasterio.open(path, 'w', driver='GTiff', width=array.shape[2],
                       height=array.shape[1], count=array.shape[0], dtype=array.dtype,
                       nodata=nodata, crs=crs, transform=transform, **options) as dst:
        dst.write(array)
        for index, name in enumerate(descriptions or (), start=1):
            dst.set_band_description(index, name)
    return path


def _image(rng, bands: int, size: int, dtype, low: int, high: int,
           nodata_rows: int) -> np.ndarray:
    """Random values in ``[low, high)`` (never 0 in every band), the first
    ``nodata_rows`` rows 0 in every band, and one valid pixel 0 in band 1 only."""
    image = rng.integers(low, high, (bands, size, size)).astype(dtype)
    image[:, :nodata_rows] = 0
    image[0, size - 1, size - 1] = 0
    return image


def _write_list(path: str, ids: List[str]) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write('\n'.join(ids) + '\n')


def write_cloudsen12(root: str, size: int = 112, seed: int = 0) -> Fake:
    """``high/<roi>/<s2>/S2L1C.tif`` (13 int16 bands, described B1..B12) and
    ``labels/manual_hq.tif`` (uint8 0..3); splits ``splits/{train,test}.txt``."""
    rng, fake = np.random.default_rng(seed), Fake(root)
    ids = ['ROI_0001/20190212T142031_20190212T143214_T19FDF',
           'ROI_0002/20200101T101031_20200101T101858_T32TQM',
           'ROI_0002/20200415T101021_20200415T101556_T32TQM']
    for number, sample_id in enumerate(ids):
        folder = osp.join(root, 'high', sample_id)
        image = _image(rng, 13, size, np.int16, 1, 10001, nodata_rows=4 + number)
        label = rng.integers(0, 4, (size, size)).astype(np.uint8)
        write_tif(osp.join(folder, 'S2L1C.tif'), image, descriptions=CLOUDSEN12_DESCRIPTIONS)
        write_tif(osp.join(folder, 'labels', 'manual_hq.tif'), label, compress='lzw')
        fake.images[sample_id], fake.labels[sample_id] = image, label
        fake.nodata[sample_id] = (image == 0).all(axis=0)
    fake.splits = dict(train=ids[:2], test=ids[2:])
    for name, split in fake.splits.items():
        _write_list(osp.join(root, 'splits', f'{name}.txt'), split)
    return fake


def write_dynamicearthnet(root: str, size: int = 448, seed: int = 1) -> Fake:
    """Daily ``PF-SR`` images (4 int16 bands) of two cubes, 7-band one-hot labels (0/255,
    with pixels in no band, in two bands, and snow), and the authors' split files (the
    image folders written ``/reprocess-cropped/UTM-24000/...``, one label name with
    dashes as in part of the release)."""
    rng, fake = np.random.default_rng(seed), Fake(root)
    cubes = [('10N', '26E-183N', '1330_3107_13', '10N-121W-39N-L3H-SR', '2018-01', '_'),
             ('17N', '9E-42N', '2196_3885_13', '17N-83W-9N-L3H-SR', '2019-02', '-')]
    lines = []
    for zone, lonlat, cube, scene, month, sep in cubes:
        pfsr = osp.join('planet', zone, lonlat, cube, 'PF-SR')
        for day in ('01', '02'):
            image = _image(rng, 4, size, np.int16, 1, 5000, nodata_rows=0)
            write_tif(osp.join(root, pfsr, f'{month}-{day}.tif'), image)
            if day == '01':
                fake.images[f'planet/{zone}/{lonlat}/{cube}@{month}'] = image
        classes = rng.integers(0, 7, (size, size))
        onehot = np.zeros((7, size, size), np.uint8)
        for index in range(7):
            onehot[index][classes == index] = 255
        onehot[:, :5, :] = 0                     # set in no band
        onehot[2, 5:8, :] = 255                  # also set in band 3 (the later band wins)
        label_name = f'{scene}-{month.replace("-", sep)}{sep}01.tif'
        label_path = osp.join('labels', f'{cube}_{zone}', 'Labels', 'Raster', scene,
                              label_name)
        write_tif(osp.join(root, label_path), onehot, compress='lzw')
        sample_id = f'planet/{zone}/{lonlat}/{cube}@{month}'
        fake.labels[sample_id] = onehot
        fake.nodata[sample_id] = np.zeros((size, size), bool)
        lines.append(f'/reprocess-cropped/UTM-24000/{zone}/{lonlat}/{cube}/PF-SR '
                     f'/{label_path} {month}')
    fake.splits = dict(train=lines, test=lines[1:])
    for name, split in fake.splits.items():
        _write_list(osp.join(root, 'dynnet_training_splits', f'{name}.txt'), split)
    return fake


def write_flair2(root: str, size: int = 448, seed: int = 2) -> Fake:
    """``flair_aerial_train/<domain>/<zone>/img/IMG_<n>.tif`` (5 uint8 bands) with
    ``flair_labels_train/.../msk/MSK_<n>.tif`` (uint8 1..19, and a few 0), and one test
    patch in ``flair_2_aerial_test``/``flair_2_labels_test``."""
    rng, fake = np.random.default_rng(seed), Fake(root)
    patches = [('flair_aerial_train', 'flair_labels_train', 'D006_2020', 'Z1_NN', '000012'),
               ('flair_aerial_train', 'flair_labels_train', 'D006_2020', 'Z2_AA', '000013'),
               ('flair_aerial_train', 'flair_labels_train', 'D013_2020', 'Z4_UF', '000901'),
               ('flair_2_aerial_test', 'flair_2_labels_test', 'D015_2020', 'Z1_UN',
                '077001')]
    for img_folder, msk_folder, domain, zone, number in patches:
        image = rng.integers(0, 256, (5, size, size)).astype(np.uint8)
        label = rng.integers(1, 20, (size, size)).astype(np.uint8)
        label[0, :7] = 0
        write_tif(osp.join(root, img_folder, domain, zone, 'img', f'IMG_{number}.tif'),
                  image, crs='EPSG:2154', transform=Affine(0.2, 0, 700000, 0, -0.2, 6600000))
        write_tif(osp.join(root, msk_folder, domain, zone, 'msk', f'MSK_{number}.tif'),
                  label, crs='EPSG:2154', transform=Affine(0.2, 0, 700000, 0, -0.2, 6600000))
        sample_id = f'{domain}/{zone}/img/IMG_{number}'
        fake.images[sample_id], fake.labels[sample_id] = image, label
        fake.nodata[sample_id] = np.zeros((size, size), bool)
        fake.splits.setdefault(img_folder, []).append(sample_id)
    return fake


def _sn2_polygon(col0: float, row0: float, col1: float, row1: float) -> list:
    """A rectangle in pixel coordinates as a GeoJSON ring in degrees (with z = 0, as the
    release writes them)."""
    lon0, lat0 = SN2_ORIGIN
    corners = [(col0, row0), (col1, row0), (col1, row1), (col0, row1), (col0, row0)]
    return [[[lon0 + c * SN2_PIXEL, lat0 - r * SN2_PIXEL, 0.0] for c, r in corners]]


def write_spacenet2(root: str, size: int = 112, seed: int = 3) -> Fake:
    """``AOI_2_Vegas_Train/MUL/MUL_AOI_2_Vegas_img<k>.tif`` (8 uint16 bands, WGS 84) with
    ``geojson/buildings/buildings_AOI_2_Vegas_img<k>.geojson``: rectangles on pixel
    edges (so the expected masks are exact), one chip without buildings, one with an
    empty file; the expected masks are in ``labels``."""
    rng, fake = np.random.default_rng(seed), Fake(root)
    aoi = osp.join(root, 'AOI_2_Vegas_Train')
    transform = Affine(SN2_PIXEL, 0, SN2_ORIGIN[0], 0, -SN2_PIXEL, SN2_ORIGIN[1])
    buildings = {1: [(10, 20, 30, 45), (50, 50, 80, 60)], 2: [], 3: None,
                 4: [(0, 100, 112, 112)]}
    for k, boxes in buildings.items():
        chip = f'AOI_2_Vegas_img{k}'
        image = _image(rng, 8, size, np.uint16, 1, 2048, nodata_rows=k)
        write_tif(osp.join(aoi, 'MUL', f'MUL_{chip}.tif'), image, crs='EPSG:4326',
                  transform=transform)
        path = osp.join(aoi, 'geojson', 'buildings', f'buildings_{chip}.geojson')
        os.makedirs(osp.dirname(path), exist_ok=True)
        label = np.zeros((size, size), np.uint8)
        with open(path, 'w', encoding='utf-8') as handle:
            if boxes is not None:  # None: an empty file
                features = [dict(type='Feature', properties=dict(BuildingId=i),
                                 geometry=dict(type='Polygon', coordinates=_sn2_polygon(*b)))
                            for i, b in enumerate(boxes)]
                json.dump(dict(type='FeatureCollection', crs=dict(
                    type='name', properties=dict(name='urn:ogc:def:crs:OGC:1.3:CRS84')),
                    features=features), handle)
        for col0, row0, col1, row1 in boxes or ():
            label[row0:row1, col0:col1] = 1
        fake.images[chip], fake.labels[chip] = image, label
        fake.nodata[chip] = (image == 0).all(axis=0)
    fake.splits = dict(train=['AOI_2_Vegas_img1', 'AOI_2_Vegas_img2', 'AOI_2_Vegas_img4'],
                       test=['AOI_2_Vegas_img3'])
    for name, split in fake.splits.items():
        _write_list(osp.join(root, 'splits', f'{name}.txt'), split)
    return fake


def write_ftw(root: str, country: str = 'germany', size: int = 112, seed: int = 4) -> Fake:
    """``<country>/s2_images/window_{a,b}/<aoi>.tif`` (4 uint16 bands),
    ``label_masks/semantic_3class/<aoi>.tif`` (uint8 0..3) and the Parquet chip index."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng, fake = np.random.default_rng(seed), Fake(root)
    folder = osp.join(root, country)
    chips = [('g_0001', 'train'), ('g_0002', 'train'), ('g_0003', 'test')]
    for number, (aoi, _) in enumerate(chips):
        for window in ('a', 'b'):
            image = _image(rng, 4, size, np.uint16, 1, 8000, nodata_rows=2 + number)
            write_tif(osp.join(folder, 's2_images', f'window_{window}', f'{aoi}.tif'), image)
            if window == 'a':
                fake.images[aoi] = image
                fake.nodata[aoi] = (image == 0).all(axis=0)
        label = rng.integers(0, 4, (size, size)).astype(np.uint8)
        write_tif(osp.join(folder, 'label_masks', 'semantic_3class', f'{aoi}.tif'), label)
        fake.labels[aoi] = label
    pq.write_table(pa.table(dict(aoi_id=[c for c, _ in chips], split=[s for _, s in chips])),
                   osp.join(folder, f'chips_{country}.parquet'))
    fake.splits = dict(train=['g_0001', 'g_0002'], test=['g_0003'])
    return fake
