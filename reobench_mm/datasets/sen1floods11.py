"""Sen1Floods11: surface water in flood events, hand-labelled 512×512 chips seen by
Sentinel-1 and Sentinel-2, in the official release's layout (the ``v1.1`` folder of the
dataset's bucket)::

    <data_root>/data/flood_events/HandLabeled/S1Hand/<Event>_<id>_S1Hand.tif
    <data_root>/data/flood_events/HandLabeled/S2Hand/<Event>_<id>_S2Hand.tif
    <data_root>/data/flood_events/HandLabeled/LabelHand/<Event>_<id>_LabelHand.tif
    <data_root>/splits/flood_handlabeled/flood_{train,valid,test,bolivia}_data.csv

- **S2** (``sensor='s2'``): 13 bands of Sentinel-2 Level-1C, B1 ... B12 with B8A
  (:data:`~reobench_mm.transforms.raster_loading.SENTINEL2_BANDS`), top-of-atmosphere
  reflectance × 10000, nodata value 0. The release's README calls them UInt16; its files
  are ``int16`` (the sample chip in the official repository).
- **S1** (``sensor='s1'``): 2 ``float32`` bands, VV and VH (:data:`S1_BANDS`), backscatter
  in dB, nodata NaN.
- **Labels** (``LabelHand``): ``int16``, -1 no data, 0 not water, 1 water. Read by
  MMSegmentation's ``LoadAnnotations``, which casts labels to ``uint8``: -1 becomes 255,
  the ignored label (the official training code sets -1 to 255 the same way).
- **Splits.** Each split file is a CSV without a header, one chip a row: the S1 file's
  name, then the label file's name. A chip is named by its label file
  (``<Event>_<id>_LabelHand.tif``); the image of the chosen sensor is the same name with
  ``S1Hand``/``S2Hand``. Rows whose image or label file is missing are left out (as the
  official training code and EarthShift's do). ``bolivia`` is the held-out flood event.
"""
from __future__ import annotations

import csv
import os.path as osp
from typing import Any, List, Optional

from mmengine.logging import print_log
from mmseg.datasets import BaseSegDataset

from ..registry import DATASETS
from ..transforms.raster_loading import SENTINEL2_BANDS

__all__ = ['Sen1Floods11Dataset', 'S1_BANDS', 'SEN1FLOODS11_SPLITS', 'SEN1FLOODS11_SENSORS',
           'read_sen1floods11_split']

#: The two Sentinel-1 bands of the S1 chips, in file order.
S1_BANDS = ('VV', 'VH')
SEN1FLOODS11_SPLITS = ('train', 'valid', 'test', 'bolivia')
#: sensor -> (image folder and file suffix, band names)
SEN1FLOODS11_SENSORS = {'s2': ('S2Hand', SENTINEL2_BANDS), 's1': ('S1Hand', S1_BANDS)}
_HAND = osp.join('data', 'flood_events', 'HandLabeled')
_LABEL = 'LabelHand'


def read_sen1floods11_split(path: str) -> List[str]:
    """The chips of a split file: the ``<Event>_<id>`` stem of each row's label file.

    Raises:
        FileNotFoundError: no such file. ValueError: a row that is not two file names,
            the second a ``..._LabelHand.tif``.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'Sen1Floods11 split file {path!r} does not exist (the '
                                'release has splits/flood_handlabeled/flood_<split>_data.csv)')
    stems = []
    with open(path, newline='') as handle:
        for number, row in enumerate(csv.reader(handle), start=1):
            row = [cell.strip() for cell in row]
            if not any(row):
                continue
            suffix = f'_{_LABEL}.tif'
            if len(row) != 2 or not row[1].endswith(suffix):
                raise ValueError(f'{path}, row {number}: expected "<image>.tif,<Event>_<id>'
                                 f'{suffix}", got {",".join(row)!r}')
            stems.append(row[1][:-len(suffix)])
    return stems


@DATASETS.register_module()
class Sen1Floods11Dataset(BaseSegDataset):
    """The hand-labelled chips of one split, seen by one sensor (module docstring).

    Args:
        split: ``'train'``, ``'valid'``, ``'test'`` or ``'bolivia'``.
        sensor: ``'s2'`` (13 bands) or ``'s1'`` (VV, VH).
        data_root: the release's ``v1.1`` folder (holding ``data/`` and ``splits/``).
        **kwargs: the other arguments of MMSegmentation's ``BaseSegDataset``
            (``metainfo``, ``pipeline``, ``test_mode``...; an unknown one is a TypeError).

    Raises:
        ValueError: a bad split or sensor, or a split without a chip whose files exist.
    """
    METAINFO = dict(classes=('not_water', 'water'), palette=[[120, 120, 120], [0, 90, 255]],
                    # stored -1, loaded as 255 (the uint8 cast of LoadAnnotations)
                    label_rules=dict(boundaries='full', ignore_index=255,
                                     reduce_zero_label=False, nodata=255))

    def __init__(self, split: str = 'test', sensor: str = 's2',
                 data_root: Optional[str] = None, metainfo: Optional[dict] = None,
                 **kwargs: Any) -> None:
        if split not in SEN1FLOODS11_SPLITS:
            raise ValueError(f'split must be one of {list(SEN1FLOODS11_SPLITS)} (the '
                             f'release\'s flood_<split>_data.csv), got {split!r}')
        if sensor not in SEN1FLOODS11_SENSORS:
            raise ValueError(f'sensor must be one of {list(SEN1FLOODS11_SENSORS)}, got '
                             f'{sensor!r}')
        self.split, self.sensor = split, sensor
        metainfo = dict(metainfo or {})
        metainfo.setdefault('band_names', SEN1FLOODS11_SENSORS[sensor][1])
        super().__init__(img_suffix='.tif', seg_map_suffix='.tif', data_root=data_root,
                         metainfo=metainfo, **kwargs)

    def load_data_list(self) -> List[dict]:
        """The split's chips whose image and label files exist, in the file's order."""
        root = self.data_root or ''
        split_file = osp.join(root, 'splits', 'flood_handlabeled',
                              f'flood_{self.split}_data.csv')
        stems = read_sen1floods11_split(split_file)
        folder = SEN1FLOODS11_SENSORS[self.sensor][0]
        data_list, missing = [], 0
        for stem in stems:
            image = osp.join(root, _HAND, folder, f'{stem}_{folder}.tif')
            label = osp.join(root, _HAND, _LABEL, f'{stem}_{_LABEL}.tif')
            if not (osp.isfile(image) and osp.isfile(label)):
                missing += 1
                continue
            data_list.append(dict(img_path=image, seg_map_path=label,
                                  label_map=self.label_map,
                                  reduce_zero_label=self.reduce_zero_label, seg_fields=[],
                                  chip=stem))
        if missing:
            print_log(f'Sen1Floods11 {self.split} ({self.sensor}): {missing} chip(s) without '
                      'an image or label file left out', logger='current')
        if not data_list:
            raise ValueError(f'Sen1Floods11 {self.split} ({self.sensor}): none of the '
                             f'{len(stems)} chips of {split_file!r} has both its {folder} '
                             f'image and its label under {osp.join(root, _HAND)!r}')
        return data_list
