""":class:`LoadOneHotAnnotations`: label maps stored as one band per class.

Some releases store a label map as a multi-band raster with one band per class, the
band ``on_value`` where the pixel has that class (DynamicEarthNet: 7 uint8 bands, 255 or
0). MMSegmentation's ``LoadAnnotations`` decodes a single-band image, so such labels are
read here with rasterio (:func:`~.raster_loading.open_raster`) and turned into one class
index per pixel::

    dict(type='LoadOneHotAnnotations', on_value=255, ignore_bands=[7], unlabelled=0)

- band ``b`` (counted from 1, as rasterio counts) gives class ``b - 1``;
- bands in ``ignore_bands`` give ``ignore_index`` instead (a class the set leaves out);
- a pixel set in several bands gets the last of them (the bands are applied in order);
- a pixel set in none gets ``unlabelled`` (a class index, or ``ignore_index``).

The result is a ``uint8`` ``gt_seg_map``, registered in ``seg_fields`` as
``LoadAnnotations`` registers it, so ``Resize`` and the other steps treat it alike (label
maps are resized by nearest neighbour).
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Sequence, Tuple

import numpy as np
from mmcv.transforms import BaseTransform

from ..registry import TRANSFORMS
from .raster_loading import open_raster

__all__ = ['LoadOneHotAnnotations', 'decode_one_hot']


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def decode_one_hot(bands: np.ndarray, on_value: int, ignore_bands: Sequence[int] = (),
                   unlabelled: int = 255, ignore_index: int = 255) -> np.ndarray:
    """The ``uint8`` class map of a ``C×H×W`` one-hot array (module docstring; band
    numbers in ``ignore_bands`` count from 1).

    Raises:
        ValueError: not a ``C×H×W`` array, more bands than ``uint8`` labels can hold.
    """
    if bands.ndim != 3:
        raise ValueError(f'a one-hot label raster is C x H x W, got shape {bands.shape}')
    if bands.shape[0] > 255:
        raise ValueError(f'{bands.shape[0]} one-hot bands do not fit uint8 class indices')
    label = np.full(bands.shape[1:], unlabelled, np.uint8)
    for index in range(bands.shape[0]):
        value = ignore_index if index + 1 in ignore_bands else index
        label[bands[index] == on_value] = value
    return label


@TRANSFORMS.register_module()
class LoadOneHotAnnotations(BaseTransform):
    """Load a one-hot label raster as ``gt_seg_map`` (module docstring).

    Required Keys: seg_map_path. Added Keys: gt_seg_map (``uint8`` ``H×W``); seg_fields
    gets ``'gt_seg_map'``.

    Args:
        on_value: the value of a band where the pixel has its class.
        ignore_bands: band numbers (from 1) whose pixels get ``ignore_index``.
        unlabelled: the label of a pixel set in no band (a class index or
            ``ignore_index``).
        ignore_index: the ignored label.

    Raises:
        ValueError: bad arguments (when built); a file whose band count is not above the
            largest ignored band, or that rasterio cannot read (when applied).
        FileNotFoundError: a missing file. KeyError: a sample without ``seg_map_path``.
    """

    def __init__(self, on_value: int = 255, ignore_bands: Sequence[int] = (),
                 unlabelled: int = 255, ignore_index: int = 255) -> None:
        for name, value in (('on_value', on_value), ('unlabelled', unlabelled),
                            ('ignore_index', ignore_index)):
            if not _is_int(value) or not 0 <= value <= 255:
                raise ValueError(f'LoadOneHotAnnotations: {name} must be an integer in '
                                 f'0..255, got {value!r}')
        if isinstance(ignore_bands, (str, bytes)) or not all(
                _is_int(b) and b >= 1 for b in ignore_bands):
            raise ValueError('LoadOneHotAnnotations: ignore_bands must be a list of band '
                             f'numbers counted from 1, e.g. [7]; got {ignore_bands!r}')
        self.on_value, self.unlabelled, self.ignore_index = on_value, unlabelled, ignore_index
        self.ignore_bands: Tuple[int, ...] = tuple(int(b) for b in ignore_bands)

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        path = results.get('seg_map_path')
        if not path:
            raise KeyError('LoadOneHotAnnotations needs the sample\'s seg_map_path; the '
                           f'sample has keys {sorted(results)}')
        with open_raster(path) as src:
            if self.ignore_bands and src.count < max(self.ignore_bands):
                raise ValueError(f'{path!r} has {src.count} bands, but ignore_bands names '
                                 f'band {max(self.ignore_bands)}')
            from rasterio.errors import NotGeoreferencedWarning
            with warnings.catch_warnings():  # only pixels are read
                warnings.simplefilter('ignore', NotGeoreferencedWarning)
                bands = src.read()
        results['gt_seg_map'] = decode_one_hot(bands, self.on_value, self.ignore_bands,
                                               self.unlabelled, self.ignore_index)
        results.setdefault('seg_fields', [])
        if 'gt_seg_map' not in results['seg_fields']:
            results['seg_fields'].append('gt_seg_map')
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(on_value={self.on_value}, ignore_bands='
                f'{list(self.ignore_bands)}, unlabelled={self.unlabelled}, ignore_index='
                f'{self.ignore_index})')
