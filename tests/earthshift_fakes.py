"""Small fakes of EarthShift's dense datasets in their official layouts (FTW, Sen1Floods11,
DeepGlobe Land Cover, DFC2022), with the real band counts, data types and nodata
conventions, written with rasterio, pyarrow and OpenCV. Each writer returns what it wrote
(the label arrays, and the image arrays where a test needs them) so that a test can count
the labels with numpy on its own."""
import csv
import os
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from raster_helpers import write_raster

#: Width of the all-zero frame of FTW's fake window-A images (no data: the four bands 0).
FTW_FRAME = 2
#: The DeepGlobe colours of the fake masks, and a colour of no class (red).
DEEPGLOBE_COLOURS = ((0, 255, 255), (255, 255, 0), (255, 0, 255), (0, 255, 0), (0, 0, 255),
                     (255, 255, 255), (0, 0, 0))
NO_CLASS_COLOUR = (255, 0, 0)


def _blocks(rng, values: Sequence[int], size: int, block: int = 8) -> np.ndarray:
    """A ``size×size`` label map of random ``block``-pixel squares of ``values``."""
    cells = -(-size // block)
    grid = rng.choice(np.asarray(values), (cells, cells))
    return np.kron(grid, np.ones((block, block), grid.dtype))[:size, :size]


# ----------------------------------------------------------------------------- FTW
def write_ftw_country(root: str, country: str, splits: Dict[str, int], size: int = 32,
                      seed: int = 0) -> Dict[str, dict]:
    """One country folder of FTW: ``chips_<country>.parquet`` (aoi_id, split, and a
    column the reader does not need), 4-band uint16 windows A and B (window A with an
    all-zero frame of :data:`FTW_FRAME` pixels), uint8 3-class masks 0..3 (3 unlabelled;
    tagged nodata 0 as the release's masks may be, which label loading must not heed)
    and 2-class masks. One extra test chip has no window B image (left out for window B).

    Returns:
        ``{aoi_id: dict(split=..., mask3=..., mask2=..., a=..., b=...)}`` (arrays as
        written; ``b`` is None for the chip without window B).
    """
    rng = np.random.default_rng(seed)
    base = osp.join(root, country)
    for folder in ('s2_images/window_a', 's2_images/window_b', 'label_masks/semantic_3class',
                   'label_masks/semantic_2class'):
        os.makedirs(osp.join(base, folder), exist_ok=True)
    chips, written = [], {}
    for split, count in splits.items():
        chips += [(f'{country[:2]}_{split}_{i}', split) for i in range(count)]
    chips.append((f'{country[:2]}_test_noB', 'test'))
    for aoi, split in chips:
        mask3 = _blocks(rng, [0, 1, 2, 3], size).astype(np.uint8)
        mask2 = np.where(mask3 == 2, 1, mask3).astype(np.uint8)
        entry = dict(split=split, mask3=mask3, mask2=mask2, b=None)
        for window in ('a', 'b'):
            if window == 'b' and aoi.endswith('noB'):
                continue
            image = rng.integers(1, 10001, (4, size, size)).astype(np.uint16)
            if window == 'a':
                image[:, :FTW_FRAME] = 0
                image[:, :, :FTW_FRAME] = 0
            write_raster(osp.join(base, 's2_images', f'window_{window}', f'{aoi}.tif'), image)
            entry[window] = image
        write_raster(osp.join(base, 'label_masks', 'semantic_3class', f'{aoi}.tif'),
                     mask3[None], nodata=0)
        write_raster(osp.join(base, 'label_masks', 'semantic_2class', f'{aoi}.tif'),
                     mask2[None], nodata=0)
        written[aoi] = entry
    table = pa.table({'aoi_id': [a for a, _ in chips], 'split': [s for _, s in chips],
                      'year': [2021] * len(chips)})
    pq.write_table(table, osp.join(base, f'chips_{country}.parquet'))
    return written


# ----------------------------------------------------------------------------- Sen1Floods11
S2_DESCRIPTIONS = ('B1', 'B2', 'B3', 'B4', 'B5', 'B6', 'B7', 'B8', 'B8A', 'B9', 'B10', 'B11',
                   'B12')


def write_sen1floods11(root: str, splits: Dict[str, List[str]], size: int = 24,
                       seed: int = 0) -> Dict[str, dict]:
    """The hand-labelled part of Sen1Floods11's v1.1 folder: per chip an int16 13-band S2
    image (nodata 0; a 2-pixel frame of zeros), a float32 VV/VH S1 image (nodata NaN; the
    top rows NaN in both bands, one pixel NaN in VH only), an int16 label (-1, 0, 1), and
    the split CSVs (S1 file name, label file name; no header). The first split's list
    also names a chip without files (left out).

    Returns:
        ``{chip: dict(label=..., s2=..., s1=...)}`` as written.
    """
    rng = np.random.default_rng(seed)
    hand = osp.join(root, 'data', 'flood_events', 'HandLabeled')
    for folder in ('S1Hand', 'S2Hand', 'LabelHand'):
        os.makedirs(osp.join(hand, folder), exist_ok=True)
    os.makedirs(osp.join(root, 'splits', 'flood_handlabeled'), exist_ok=True)
    written = {}
    for index, (split, chips) in enumerate(splits.items()):
        rows = [[f'{chip}_S1Hand.tif', f'{chip}_LabelHand.tif'] for chip in chips]
        if index == 0:
            rows.append(['Nowhere_1_S1Hand.tif', 'Nowhere_1_LabelHand.tif'])
        with open(osp.join(root, 'splits', 'flood_handlabeled', f'flood_{split}_data.csv'),
                  'w', newline='') as handle:
            csv.writer(handle).writerows(rows)
        for chip in chips:
            label = _blocks(rng, [-1, 0, 1], size, block=6).astype(np.int16)
            s2 = rng.integers(1, 6000, (13, size, size)).astype(np.int16)
            s2[:, :2] = 0
            s2[:, :, :2] = 0
            s1 = rng.uniform(-40, 5, (2, size, size)).astype(np.float32)
            s1[:, :3] = np.nan
            s1[1, size // 2, size // 2] = np.nan
            write_raster(osp.join(hand, 'S2Hand', f'{chip}_S2Hand.tif'), s2, nodata=0,
                         descriptions=S2_DESCRIPTIONS)
            write_raster(osp.join(hand, 'S1Hand', f'{chip}_S1Hand.tif'), s1,
                         nodata=float('nan'), descriptions=('VV', 'VH'))
            write_raster(osp.join(hand, 'LabelHand', f'{chip}_LabelHand.tif'), label[None])
            written[chip] = dict(label=label, s2=s2, s1=s1)
    return written


# ----------------------------------------------------------------------------- DeepGlobe
def write_deepglobe(root: str, ids: Sequence[int], size: int = 40, seed: int = 0
                    ) -> Dict[int, np.ndarray]:
    """DeepGlobe Land Cover's release: ``train/<id>_sat.jpg`` and ``train/<id>_mask.png``
    (RGB colour masks of :data:`DEEPGLOBE_COLOURS` and :data:`NO_CLASS_COLOUR`, with
    every channel off its pure value by up to 40, as a lossy mask is), and one
    ``valid/<id>_sat.jpg`` without a mask.

    Returns:
        ``{id: class index map}`` (0..5 the classes, 6 unknown, 7 the colour of no class).
    """
    rng = np.random.default_rng(seed)
    for folder in ('train', 'valid'):
        os.makedirs(osp.join(root, folder), exist_ok=True)
    colours = np.asarray(DEEPGLOBE_COLOURS + (NO_CLASS_COLOUR, ), np.int16)
    written = {}
    for image_id in ids:
        index = _blocks(rng, list(range(8)), size)
        rgb = colours[index]
        noise = rng.integers(0, 41, rgb.shape)
        rgb = np.where(rgb == 255, rgb - noise, rgb + noise).astype(np.uint8)
        image = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        cv2.imwrite(osp.join(root, 'train', f'{image_id}_sat.jpg'), image)
        cv2.imwrite(osp.join(root, 'train', f'{image_id}_mask.png'), rgb[..., ::-1])
        written[image_id] = index
    cv2.imwrite(osp.join(root, 'valid', '999_sat.jpg'), np.zeros((size, size, 3), np.uint8))
    return written


# ----------------------------------------------------------------------------- DFC2022
def write_dfc2022(root: str, regions: Dict[str, int], size: int = 32, seed: int = 0
                  ) -> Dict[Tuple[str, str], np.ndarray]:
    """DFC2022's ``labeled_train/<region>/{BDORTHO,RGEALTI,UrbanAtlas}``: 3-band uint8
    orthophotos, float32 DEMs at half the size, uint8 UrbanAtlas labels 0..15; and an
    ``unlabeled_train`` region without labels.

    Returns:
        ``{(region, id): label}`` as written.
    """
    rng = np.random.default_rng(seed)
    written = {}
    for region, count in regions.items():
        base = osp.join(root, 'labeled_train', region)
        for folder in ('BDORTHO', 'RGEALTI', 'UrbanAtlas'):
            os.makedirs(osp.join(base, folder), exist_ok=True)
        for i in range(count):
            image_id = f'{30 + i}-2012-0{i}'
            label = _blocks(rng, list(range(16)), size).astype(np.uint8)
            write_raster(osp.join(base, 'BDORTHO', f'{image_id}.tif'),
                         rng.integers(0, 256, (3, size, size)).astype(np.uint8))
            write_raster(osp.join(base, 'RGEALTI', f'{image_id}_RGEALTI.tif'),
                         rng.uniform(0, 500, (1, size // 2, size // 2)).astype(np.float32))
            write_raster(osp.join(base, 'UrbanAtlas', f'{image_id}_UA2012.tif'), label[None])
            written[region, image_id] = label
    os.makedirs(osp.join(root, 'unlabeled_train', 'Other', 'BDORTHO'), exist_ok=True)
    return written
