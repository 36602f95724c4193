"""Fields of The World (FTW): field-boundary segmentation of Sentinel-2 chips from 25
countries, in the official release's layout (``ftw data download`` of the
fieldsoftheworld/ftw-baselines tools, one folder per country)::

    <data_root>/<country>/chips_<country>.parquet        # the chip index: aoi_id, split
    <data_root>/<country>/s2_images/window_a/<aoi_id>.tif
    <data_root>/<country>/s2_images/window_b/<aoi_id>.tif
    <data_root>/<country>/label_masks/semantic_3class/<aoi_id>.tif
    <data_root>/<country>/label_masks/semantic_2class/<aoi_id>.tif

- **Images.** 256×256 GeoTIFFs of 4 ``uint16`` bands, Sentinel-2 L2A B04, B03, B02, B08
  (red, green, blue, near-infrared; :data:`FTW_BANDS`), without a nodata value. Window A
  and window B are two acquisitions of the same chip in two seasons (planting and
  harvest); both share the chip's label mask.
- **Labels.** ``uint8``: 0 background, 1 field, 2 field boundary (3-class masks only);
  3 marks unlabelled pixels in the countries with presence-only labels (the official
  evaluation ignores it), loaded here as the ignored 255.
- **Splits.** The ``split`` column of the chip index (``train``, ``val``, ``test``), read
  with pyarrow. Chips whose image or mask file is missing are left out (the release has
  chips without imagery), as the official dataset and EarthShift's do.

With ``window='both'`` the samples are every chip's window A, then every chip's window B
(EarthShift's order for the geographic and year pairs).
"""
from __future__ import annotations

import os.path as osp
from typing import Any, Dict, List, Optional, Tuple

from mmengine.logging import print_log
from mmseg.datasets import BaseSegDataset

from ..registry import DATASETS

__all__ = ['FTWDataset', 'FTW_BANDS', 'FTW_COUNTRIES', 'FTW_SPLITS', 'FTW_WINDOWS',
           'FTW_MASKS', 'FTW_UNLABELLED', 'read_ftw_chip_index']

#: The bands of the chips, in file order (red, green, blue, near-infrared).
FTW_BANDS = ('B04', 'B03', 'B02', 'B08')
#: The countries of the release (its folder names).
FTW_COUNTRIES = (
    'austria', 'belgium', 'brazil', 'cambodia', 'corsica', 'croatia', 'denmark', 'estonia',
    'finland', 'france', 'germany', 'india', 'kenya', 'latvia', 'lithuania', 'luxembourg',
    'netherlands', 'portugal', 'rwanda', 'slovakia', 'slovenia', 'south_africa', 'spain',
    'sweden', 'vietnam')
FTW_SPLITS = ('train', 'val', 'test')
#: ``'a'``, ``'b'``, or both (every chip's A, then every chip's B).
FTW_WINDOWS = ('a', 'b', 'both')
#: The mask folders and their classes.
FTW_MASKS = {'semantic_3class': ('background', 'field', 'field_boundary'),
             'semantic_2class': ('background', 'field')}
#: The stored label of unlabelled pixels (presence-only countries), loaded as ignored.
FTW_UNLABELLED = 3
_PALETTE = [[0, 0, 0], [46, 160, 67], [255, 196, 0]]


def read_ftw_chip_index(path: str) -> List[Tuple[str, str]]:
    """``[(aoi_id, split), ...]`` of a country's ``chips_<country>.parquet``, in file order.

    Raises:
        FileNotFoundError: no such file. ImportError: pyarrow missing. ValueError: a
            file pyarrow cannot read, or one without the ``aoi_id`` and ``split`` columns.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'FTW chip index {path!r} does not exist: each country '
                                'folder of the release holds chips_<country>.parquet')
    try:
        import pyarrow.parquet as pq
    except ImportError as error:  # a runtime requirement: said how to install it
        raise ImportError('reading the FTW chip index needs pyarrow: pip install -r '
                          'requirements/runtime.txt (or pip install pyarrow)') from error
    try:
        schema = pq.read_schema(path)
    except Exception as error:  # pyarrow raises ArrowInvalid/OSError for bad files
        raise ValueError(f'cannot read {path!r} as Parquet: {error}') from error
    missing = [c for c in ('aoi_id', 'split') if c not in schema.names]
    if missing:
        raise ValueError(f'FTW chip index {path!r} has no column(s) {missing} (it has '
                         f'{list(schema.names)})')
    table = pq.read_table(path, columns=['aoi_id', 'split'])
    return list(zip((str(v) for v in table.column('aoi_id').to_pylist()),
                    (str(v) for v in table.column('split').to_pylist())))


def _choice(name: str, value: Any, valid) -> Any:
    if value not in valid:
        raise ValueError(f'{name} must be one of {list(valid)}, got {value!r}')
    return value


@DATASETS.register_module()
class FTWDataset(BaseSegDataset):
    """One country's chips of one split of Fields of The World (module docstring).

    Args:
        country: the country folder (one of :data:`FTW_COUNTRIES`).
        split: ``'train'``, ``'val'`` or ``'test'`` (the chip index's ``split``).
        window: ``'a'``, ``'b'`` or ``'both'``.
        mask: ``'semantic_3class'`` (background, field, boundary) or
            ``'semantic_2class'`` (background, field).
        data_root: the folder holding the country folders.
        **kwargs: the other arguments of MMSegmentation's ``BaseSegDataset``
            (``metainfo``, ``pipeline``, ``test_mode``...; an unknown one is a TypeError).

    Raises:
        ValueError: a bad country, split, window or mask, a ``data_root`` without the
            country folder, or a chip index without chips of the split whose files exist.
    """
    METAINFO = dict(classes=FTW_MASKS['semantic_3class'], palette=_PALETTE,
                    band_names=FTW_BANDS,
                    label_rules=dict(boundaries='full', ignore_index=255,
                                     reduce_zero_label=False, nodata=None))

    def __init__(self, country: str = 'germany', split: str = 'test', window: str = 'both',
                 mask: str = 'semantic_3class', data_root: Optional[str] = None,
                 metainfo: Optional[dict] = None, **kwargs: Any) -> None:
        self.country = _choice('country', country, FTW_COUNTRIES)
        self.split = _choice('split', split, FTW_SPLITS)
        self.window = _choice('window', window, FTW_WINDOWS)
        self.mask = _choice('mask', mask, tuple(FTW_MASKS))
        metainfo = dict(metainfo or {})
        if mask == 'semantic_2class' and 'classes' not in metainfo:
            metainfo.update(classes=FTW_MASKS[mask], palette=_PALETTE[:2])
        super().__init__(img_suffix='.tif', seg_map_suffix='.tif', data_root=data_root,
                         metainfo=metainfo, **kwargs)

    @classmethod
    def get_label_map(cls, new_classes=None) -> Optional[Dict[int, int]]:
        """MMSegmentation's map of the classes onto ``new_classes`` (a subset of them,
        the others ignored), with the unlabelled value :data:`FTW_UNLABELLED` ignored."""
        label_map = super().get_label_map(new_classes)
        label_map = dict(label_map) if label_map else {i: i for i in range(3)}
        label_map[FTW_UNLABELLED] = 255
        return label_map

    def load_data_list(self) -> List[dict]:
        """The chips of the split (image and mask present), window A first."""
        root = self.data_root or ''
        country_dir = osp.join(root, self.country)
        if not osp.isdir(country_dir):
            raise ValueError(f'FTW country folder {country_dir!r} does not exist: data_root '
                             'must be the folder holding the country folders (the "ftw" '
                             'folder that `ftw data download` unpacks)')
        index = read_ftw_chip_index(osp.join(country_dir, f'chips_{self.country}.parquet'))
        chips = [aoi for aoi, split in index if split == self.split]
        windows = ('a', 'b') if self.window == 'both' else (self.window, )
        data_list, missing = [], 0
        for window in windows:
            for aoi in chips:
                image = osp.join(country_dir, 's2_images', f'window_{window}', f'{aoi}.tif')
                label = osp.join(country_dir, 'label_masks', self.mask, f'{aoi}.tif')
                if not (osp.isfile(image) and osp.isfile(label)):
                    missing += 1
                    continue
                data_list.append(dict(
                    img_path=image, seg_map_path=label, label_map=self.label_map,
                    reduce_zero_label=self.reduce_zero_label, seg_fields=[], aoi_id=aoi,
                    country=self.country, window=window))
        if missing:
            print_log(f'FTW {self.country} {self.split}: {missing} chip window(s) without '
                      'an image or mask file left out', logger='current')
        if not data_list:
            raise ValueError(f'FTW {self.country}: no chip of split {self.split!r} with an '
                             f'image (window {self.window}) and a {self.mask} mask under '
                             f'{country_dir!r} ({len(chips)} listed in the chip index)')
        return data_list
