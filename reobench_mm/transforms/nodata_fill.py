"""``FillNodata``: a number in place of the nodata and non-finite pixels of a raster.

Float rasters mark missing data with NaN (Sentinel-1 backscatter in dB: Sen1Floods11's
S1 chips), which the model's normalisation would carry into every output. Put the step
after :class:`~.raster_loading.IgnoreNodataLabels` (the labels of those pixels are ignored
there; the image still needs finite values)::

    dict(type='LoadMultiBandImageFromFile', band_names=('VV', 'VH')),
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='FillNodata', value=0.0),

Every pixel of ``results['nodata_mask']`` (all bands) and every non-finite value (a
band's own NaN or infinity, also outside the mask) gets ``value``. The official
Sen1Floods11 training code replaces NaN by 0 (``numpy.nan_to_num``).
"""
from __future__ import annotations

import math
from typing import Any, Dict

import numpy as np
from mmcv.transforms import BaseTransform

from ..registry import TRANSFORMS

__all__ = ['FillNodata']


@TRANSFORMS.register_module()
class FillNodata(BaseTransform):
    """Set the nodata and non-finite pixels of ``img`` to ``value``.

    Required Keys:

    - img; nodata_mask (optional, from ``LoadMultiBandImageFromFile``)

    Modified Keys:

    - img (a copy; the same type)

    Args:
        value: the fill value, a finite number (an integer for integer images).

    Raises:
        ValueError: a non-finite or non-numeric value (when built). RuntimeError (when
            applied): no ``img``, a mask of another shape than the image, or a value the
            image's integer type cannot hold.
    """

    def __init__(self, value: float = 0.0) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                             np.floating)) \
                or not math.isfinite(float(value)):
            raise ValueError(f'value must be a finite number, e.g. 0.0, got {value!r}')
        self.value = float(value)

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        image = results.get('img')
        if image is None:
            raise RuntimeError('FillNodata needs the image: put it after the image loading '
                               f'(the sample has keys {sorted(results)})')
        where = f'(image {results.get("img_path")})'
        mask = results.get('nodata_mask')
        fill = np.zeros(image.shape[:2], bool) if mask is None else np.asarray(mask, bool)
        if fill.shape != tuple(image.shape[:2]):
            raise RuntimeError(f'FillNodata: the nodata mask is {fill.shape} but the image '
                               f'{image.shape[:2]}; put it before resizing or cropping {where}')
        image = image.copy()
        if image.dtype.kind in 'iu':
            info = np.iinfo(image.dtype)
            if self.value != int(self.value) or not info.min <= self.value <= info.max:
                raise RuntimeError(f'FillNodata: value={self.value} does not fit the '
                                   f'{image.dtype} image {where}')
            image[fill] = int(self.value)
        else:
            image[fill] = self.value
            image[~np.isfinite(image)] = self.value
        results['img'] = image
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(value={self.value})'
